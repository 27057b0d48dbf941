"""The words of the bundled demo domain: English forms, Chinese forms, measure words, and what goes with what.

Every table here is read by `repair.data.demo.grammar`, which combines the entries with a synchronous grammar.
Kinds group nouns by what can be said of them (people read books; things lie on tables; a bridge is
crossed, not entered). An English word always has one Chinese form for a given kind of noun, so the
English text of a phrase determines its translation.
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- nouns
# (singular, plural, Chinese, measure word)

NOUNS: dict[str, list[tuple[str, str, str, str]]] = {
    "person": [
        ("teacher", "teachers", "老师", "位"),
        ("doctor", "doctors", "医生", "位"),
        ("nurse", "nurses", "护士", "名"),
        ("student", "students", "学生", "名"),
        ("farmer", "farmers", "农民", "位"),
        ("artist", "artists", "艺术家", "位"),
        ("writer", "writers", "作家", "位"),
        ("lawyer", "lawyers", "律师", "位"),
        ("driver", "drivers", "司机", "名"),
        ("singer", "singers", "歌手", "位"),
        ("cook", "cooks", "厨师", "名"),
        ("child", "children", "孩子", "个"),
        ("girl", "girls", "女孩", "个"),
        ("boy", "boys", "男孩", "个"),
        ("woman", "women", "女人", "个"),
        ("man", "men", "男人", "个"),
        ("friend", "friends", "朋友", "位"),
        ("neighbor", "neighbors", "邻居", "位"),
        ("king", "kings", "国王", "位"),
        ("tourist", "tourists", "游客", "名"),
    ],
    "animal": [
        ("dog", "dogs", "狗", "只"),
        ("cat", "cats", "猫", "只"),
        ("horse", "horses", "马", "匹"),
        ("bird", "birds", "鸟", "只"),
        ("cow", "cows", "牛", "头"),
        ("rabbit", "rabbits", "兔子", "只"),
        ("duck", "ducks", "鸭子", "只"),
        ("tiger", "tigers", "老虎", "只"),
        ("monkey", "monkeys", "猴子", "只"),
        ("bear", "bears", "熊", "只"),
    ],
    "readable": [
        ("book", "books", "书", "本"),
        ("letter", "letters", "信", "封"),
        ("newspaper", "newspapers", "报纸", "份"),
        ("map", "maps", "地图", "张"),
        ("story", "stories", "故事", "个"),
        ("poem", "poems", "诗", "首"),
    ],
    "object": [
        ("pen", "pens", "笔", "支"),
        ("key", "keys", "钥匙", "把"),
        ("umbrella", "umbrellas", "雨伞", "把"),
        ("bag", "bags", "包", "个"),
        ("box", "boxes", "盒子", "个"),
        ("cup", "cups", "杯子", "个"),
        ("phone", "phones", "手机", "部"),
        ("camera", "cameras", "相机", "台"),
        ("hat", "hats", "帽子", "顶"),
        ("ball", "balls", "球", "个"),
        ("photo", "photos", "照片", "张"),
        ("painting", "paintings", "画", "幅"),
    ],
    "vehicle": [
        ("car", "cars", "汽车", "辆"),
        ("bicycle", "bicycles", "自行车", "辆"),
        ("bus", "buses", "公共汽车", "辆"),
        ("boat", "boats", "船", "条"),
    ],
    "furniture": [
        ("table", "tables", "桌子", "张"),
        ("chair", "chairs", "椅子", "把"),
        ("bed", "beds", "床", "张"),
        ("desk", "desks", "书桌", "张"),
        ("sofa", "sofas", "沙发", "张"),
    ],
    "food": [
        ("apple", "apples", "苹果", "个"),
        ("cake", "cakes", "蛋糕", "块"),
        ("orange", "oranges", "橙子", "个"),
        ("egg", "eggs", "鸡蛋", "个"),
    ],
    "plant": [
        ("tree", "trees", "树", "棵"),
        ("flower", "flowers", "花", "朵"),
    ],
    "building": [
        ("library", "libraries", "图书馆", "座"),
        ("hospital", "hospitals", "医院", "家"),
        ("school", "schools", "学校", "所"),
        ("museum", "museums", "博物馆", "座"),
        ("restaurant", "restaurants", "餐厅", "家"),
        ("shop", "shops", "商店", "家"),
        ("station", "stations", "车站", "个"),
        ("hotel", "hotels", "酒店", "家"),
        ("house", "houses", "房子", "座"),
    ],
    "room": [
        ("office", "offices", "办公室", "间"),
        ("kitchen", "kitchens", "厨房", "间"),
        ("room", "rooms", "房间", "个"),
        ("classroom", "classrooms", "教室", "间"),
    ],
    "area": [
        ("park", "parks", "公园", "个"),
        ("garden", "gardens", "花园", "个"),
        ("village", "villages", "村庄", "个"),
        ("city", "cities", "城市", "座"),
        ("market", "markets", "市场", "个"),
        ("forest", "forests", "森林", "片"),
    ],
    "structure": [
        ("bridge", "bridges", "桥", "座"),
        ("tower", "towers", "塔", "座"),
        ("wall", "walls", "墙", "面"),
    ],
    "nature": [
        ("river", "rivers", "河", "条"),
        ("mountain", "mountains", "山", "座"),
        ("lake", "lakes", "湖", "个"),
        ("island", "islands", "岛", "座"),
    ],
    "part": [
        ("door", "doors", "门", "扇"),
        ("window", "windows", "窗户", "扇"),
        ("roof", "roofs", "屋顶", "个"),
    ],
}

# Domain nouns (build_demo's `domain`): words the training corpus holds only a few times and the Purity input
# holds often, as a team's own text holds its field's words. Off by default.
DOMAIN_NOUNS: dict[str, list[tuple[str, str, str, str]]] = {
    "person": [("pharmacist", "pharmacists", "药剂师", "位"), ("sailor", "sailors", "水手", "名")],
    "animal": [("otter", "otters", "水獭", "只"), ("penguin", "penguins", "企鹅", "只")],
    # Characters the corpus already has, so that the target vocabulary can spell what a correction teaches.
    "object": [("envelope", "envelopes", "信封", "个"), ("schoolbag", "schoolbags", "书包", "个")],
    "readable": [("novel", "novels", "小说", "本")],
    "structure": [("lighthouse", "lighthouses", "灯塔", "座")],
}

# Places a town-sized thing can be "in" (a library is in a city, not in a garden).
SETTLEMENTS = {"city", "village"}

# Transliterated names (English, Chinese).
NAMES: list[tuple[str, str]] = [
    ("John", "约翰"), ("Mary", "玛丽"), ("Emma", "艾玛"), ("David", "大卫"), ("Anna", "安娜"), ("Peter", "彼得"),
    ("Lucy", "露西"), ("Tom", "汤姆"), ("Alice", "爱丽丝"), ("Jack", "杰克"), ("Linda", "琳达"), ("Henry", "亨利"),
]

# ----------------------------------------------------------------------------- adjectives
# (English, order group, {kind: Chinese attributive form}); English stacks at most one adjective of
# each group, in group order (opinion, size, age, colour, material). A form ending in 的 keeps it
# unless it stands right before the noun after another adjective.

PEOPLE = ("person",)
THINGS = ("readable", "object", "vehicle", "furniture", "food")
PLACES = ("building", "room", "area", "structure", "nature")

def _kinds(kinds: tuple[str, ...], form: str) -> dict[str, str]:
    return {k: form for k in kinds}


ADJECTIVES: list[tuple[str, int, dict[str, str]]] = [
    # opinion / state
    ("famous", 0, {**_kinds(PEOPLE, "著名的"), "readable": "著名的", "object": "著名的",
                   **_kinds(("building", "structure", "nature"), "著名的")}),
    ("kind", 0, _kinds(PEOPLE, "善良的")),
    ("tired", 0, {**_kinds(PEOPLE, "疲惫的"), "animal": "疲惫的"}),
    ("happy", 0, {**_kinds(PEOPLE, "快乐的"), "animal": "快乐的"}),
    ("busy", 0, {**_kinds(PEOPLE, "忙碌的"), "building": "繁忙的", "area": "繁忙的", "room": "繁忙的"}),
    ("brave", 0, _kinds(PEOPLE, "勇敢的")),
    ("angry", 0, {**_kinds(PEOPLE, "生气的"), "animal": "生气的"}),
    ("hungry", 0, {**_kinds(PEOPLE, "饥饿的"), "animal": "饥饿的"}),
    ("beautiful", 0, {"person": "美丽的", "animal": "美丽的", **_kinds(THINGS[:4], "漂亮的"),
                      "plant": "美丽的", **_kinds(PLACES, "美丽的"), "part": "漂亮的"}),
    ("expensive", 0, {**_kinds(("object", "vehicle", "furniture", "food"), "昂贵的"), "building": "昂贵的"}),
    ("heavy", 0, {"object": "沉重的", "furniture": "沉重的", "readable": "厚重的", "part": "沉重的"}),
    ("interesting", 0, {"readable": "有趣的", "building": "有趣的"}),
    ("quiet", 0, {**_kinds(PEOPLE, "安静的"), **_kinds(PLACES, "安静的")}),
    ("dark", 0, {"room": "黑暗的", "building": "黑暗的", "area": "黑暗的", "nature": "黑暗的"}),
    # size
    ("big", 1, {"animal": "大", **_kinds(THINGS, "大"), "plant": "大", **_kinds(PLACES, "大"), "part": "大"}),
    ("small", 1, {"animal": "小", **_kinds(THINGS, "小"), "plant": "小", **_kinds(PLACES, "小"), "part": "小"}),
    ("little", 1, {"person": "小", "animal": "小"}),
    ("tall", 1, {"person": "高大的", "plant": "高大的", "building": "高大的", "structure": "高大的"}),
    ("long", 1, {"readable": "长", "vehicle": "长", "structure": "长", "nature": "长", "furniture": "长"}),
    # age
    ("old", 2, {"person": "年老的", "animal": "老", **_kinds(THINGS, "旧"), "part": "旧",
                "plant": "古老的", **_kinds(PLACES, "古老的")}),
    ("young", 2, {"person": "年轻的", "animal": "年幼的", "plant": "年幼的"}),
    ("new", 2, {"person": "新", **_kinds(THINGS, "新"), "part": "新", **_kinds(("building", "room", "structure"), "新")}),
    # colour
    ("red", 3, {**_kinds(THINGS[1:4], "红色的"), "part": "红色的", "plant": "红色的", "building": "红色的",
                "structure": "红色的", "readable": "红色的"}),
    ("blue", 3, {**_kinds(THINGS[1:4], "蓝色的"), "part": "蓝色的", "building": "蓝色的", "readable": "蓝色的"}),
    ("green", 3, {**_kinds(THINGS[1:4], "绿色的"), "part": "绿色的", "plant": "绿色的", "food": "绿色的",
                  "building": "绿色的"}),
    ("black", 3, {"animal": "黑色的", **_kinds(THINGS[1:4], "黑色的"), "part": "黑色的", "readable": "黑色的"}),
    ("white", 3, {"animal": "白色的", **_kinds(THINGS[1:4], "白色的"), "part": "白色的", "plant": "白色的",
                  "building": "白色的", "structure": "白色的"}),
    # material
    ("wooden", 4, {"object": "木制的", "furniture": "木制的", "part": "木制的", "structure": "木制的",
                   "vehicle": "木制的"}),
]

# Predicative forms: "the teacher was tired" -> 老师很累。
PREDICATIVE: dict[str, tuple[str, dict[str, str]]] = {
    "tired": ("person", {"person": "很累", "animal": "很累"}),
    "happy": ("person", {"person": "很高兴", "animal": "很高兴"}),
    "busy": ("person", {"person": "很忙", "building": "很忙", "area": "很忙"}),
    "angry": ("person", {"person": "很生气", "animal": "很生气"}),
    "hungry": ("person", {"person": "很饿", "animal": "很饿"}),
    "famous": ("person", {"person": "很有名", "building": "很有名", "nature": "很有名", "readable": "很有名"}),
    "beautiful": ("place", {"person": "很美丽", "plant": "很美丽", **_kinds(PLACES, "很美丽")}),
    "quiet": ("place", {"person": "很安静", **_kinds(PLACES, "很安静")}),
    "expensive": ("thing", {**_kinds(("object", "vehicle", "furniture", "food"), "很贵"), "building": "很贵"}),
    "heavy": ("thing", {"object": "很重", "furniture": "很重", "readable": "很重"}),
    "old": ("thing", {"person": "很老", **_kinds(THINGS, "很旧"), **_kinds(PLACES, "很古老")}),
    "interesting": ("thing", {"readable": "很有趣", "building": "很有趣"}),
}

# ----------------------------------------------------------------------------- determiners
# (English, number, Chinese, whether a measure word follows). number: "sg" or "pl".
# "the" leaves the noun bare (a plural person takes 们, as a bare plural does).

DETERMINERS: list[tuple[str, str, str, bool]] = [
    ("a", "sg", "一", True),
    ("the", "sg", "", False),
    ("the", "pl", "", False),
    ("this", "sg", "这", True),
    ("that", "sg", "那", True),
    ("these", "pl", "这些", False),
    ("those", "pl", "那些", False),
    ("some", "pl", "一些", False),
    ("many", "pl", "许多", False),
    ("several", "pl", "几", True),
]
DETERMINER_WEIGHTS = [6, 9, 3, 1.2, 1.2, 0.8, 0.8, 1, 1, 0.8]

NUMBERS: list[tuple[str, str]] = [
    ("two", "两"), ("three", "三"), ("four", "四"), ("five", "五"), ("six", "六"), ("seven", "七"),
    ("eight", "八"), ("nine", "九"), ("ten", "十"),
]

POSSESSIVES: list[tuple[str, str]] = [("my", "我的"), ("his", "他的"), ("her", "她的"), ("their", "他们的")]

# ----------------------------------------------------------------------------- prepositions
# A noun-modifying PP goes before the noun in Chinese with 的: "the cat under the table" -> 桌子下面的猫;
# an event location goes before the verb with 在: "slept under the table" -> 在桌子下面睡觉了.
# (English, Chinese frame with {} for the object, {head kind: allowed object kinds}).

ALL_PLACES = ["building", "room", "area", "structure", "nature"]

PREPOSITIONS: dict[str, tuple[str, dict[str, list[str]]]] = {
    "in": ("{}里", {
        "person": ["building", "room", "area"], "animal": ["room", "area"],
        "readable": ["room", "building", "object:bag,box"], "object": ["room", "building", "object:bag,box"],
        "furniture": ["room"], "food": ["room", "object:bag,box"], "plant": ["area"],
        "vehicle": ["area"], "building": ["area:" + ",".join(sorted(SETTLEMENTS))],
    }),
    "on": ("{}上", {
        "readable": ["furniture"], "object": ["furniture"], "food": ["furniture"],
        "animal": ["furniture", "part:roof", "structure:bridge,wall"], "person": ["structure:bridge", "nature:island"],
        "building": ["nature:island"], "vehicle": ["structure:bridge"], "plant": ["nature:island"],
    }),
    "under": ("{}下面", {
        "animal": ["furniture", "plant:tree", "vehicle"], "object": ["furniture"], "readable": ["furniture"],
        "person": ["plant:tree", "structure:bridge"], "food": ["furniture"],
    }),
    "near": ("{}附近", {
        "person": ALL_PLACES, "animal": ALL_PLACES, "vehicle": ALL_PLACES, "building": ALL_PLACES,
        "area": ["nature", "structure", "building"], "structure": ["nature", "building", "area"],
        "plant": ["building", "structure", "nature"],
    }),
    "behind": ("{}后面", {
        "person": ["building", "structure", "plant", "vehicle"], "animal": ["building", "structure", "plant", "vehicle"],
        "vehicle": ["building", "structure"], "building": ["building", "structure", "nature:mountain"],
        "plant": ["building", "structure"], "structure": ["building"],
    }),
    "beside": ("{}旁边", {
        "person": ["vehicle", "structure", "plant", "furniture"], "animal": ["furniture", "plant", "vehicle", "structure"],
        "vehicle": ["building", "structure", "plant"], "furniture": ["furniture", "part:window,door"],
        "building": ["nature:river,lake", "building"], "plant": ["building", "structure", "nature:river,lake"],
        "object": ["object"],
    }),
    "outside": ("{}外面", {
        "person": ["building", "room"], "animal": ["building"], "vehicle": ["building"],
    }),
}

# Prepositions that only modify nouns (no event reading): (English, Chinese frame with {} for the
# object, {head kind: allowed object kinds}). "with" reads as carrying for people, having for places.
NOUN_ONLY_PREPOSITIONS: list[tuple[str, str, dict[str, list[str]]]] = [
    ("from", "来自{}", {"person": ["area:city,village", "building:school,hospital"]}),
    ("with", "带着{}", {"person": ["object", "readable", "animal:dog,cat,bird,rabbit"]}),
    ("with", "有{}", {"building": ["part", "area:garden", "structure:tower"],
                     "room": ["part:window,door", "furniture"], "area": ["structure", "plant:tree"]}),
]

# ----------------------------------------------------------------------------- verbs
# (base, third person singular, past, Chinese base, Chinese past, subject kinds, object kinds,
#  {object kind: (Chinese base, Chinese past)} overrides).

ANY_THING = ["readable", "object", "vehicle", "furniture", "food", "plant"]

TRANSITIVE: list[tuple] = [
    ("read", "reads", "read", "读", "读了", ["person"], ["readable"], {}),
    ("write", "writes", "wrote", "写", "写了", ["person"], ["readable:letter,book,poem,story"], {}),
    ("buy", "buys", "bought", "买", "买了", ["person"], ["readable", "object", "vehicle", "furniture", "food", "animal"], {}),
    ("find", "finds", "found", "找到", "找到了", ["person", "animal"], ["readable", "object", "food", "animal"], {}),
    ("lose", "loses", "lost", "丢", "丢了", ["person"], ["object", "readable"], {}),
    ("carry", "carries", "carried", "拿", "拿了", ["person"], ["object", "readable", "food", "furniture"],
     {"furniture": ("搬", "搬了")}),
    ("open", "opens", "opened", "打开", "打开了", ["person"], ["part:door,window", "object:box,bag,umbrella", "readable:book,letter"], {}),
    ("paint", "paints", "painted", "画", "画了", ["person"], ["animal", "plant", "person", "building", "part", "furniture", "nature"],
     {"building": ("粉刷", "粉刷了"), "part": ("粉刷", "粉刷了"), "furniture": ("粉刷", "粉刷了")}),
    ("clean", "cleans", "cleaned", "擦", "擦了", ["person"], ["room", "building:house,office", "vehicle", "furniture", "part:window,door"],
     {"room": ("打扫", "打扫了"), "building": ("打扫", "打扫了")}),
    ("see", "sees", "saw", "看见", "看见了", ["person", "animal"], ["person", "animal", "object", "vehicle", "building", "plant", "structure"], {}),
    ("meet", "meets", "met", "遇见", "遇见了", ["person"], ["person"], {}),
    ("help", "helps", "helped", "帮助", "帮助了", ["person"], ["person"], {}),
    ("visit", "visits", "visited", "拜访", "拜访了", ["person"], ["person", "building", "area", "nature"],
     {"building": ("参观", "参观了"), "area": ("参观", "参观了"), "nature": ("游览", "游览了")}),
    ("chase", "chases", "chased", "追", "追了", ["animal", "person"], ["animal"], {}),
    ("feed", "feeds", "fed", "喂", "喂了", ["person"], ["animal"], {}),
    ("build", "builds", "built", "建造", "建造了", ["person"], ["building", "structure"], {}),
    ("drive", "drives", "drove", "开", "开了", ["person"], ["vehicle:car,bus"], {}),
    ("repair", "repairs", "repaired", "修理", "修理了", ["person"], ["object", "vehicle", "furniture", "part", "structure"], {}),
    ("eat", "eats", "ate", "吃", "吃了", ["person", "animal"], ["food"], {}),
    ("invite", "invites", "invited", "邀请", "邀请了", ["person"], ["person"], {}),
    ("leave", "leaves", "left", "离开", "离开了", ["person"], ["building", "room", "area"], {}),
    ("enter", "enters", "entered", "走进", "走进了", ["person", "animal"], ["building", "room", "area:garden,park,forest"], {}),
    ("cross", "crosses", "crossed", "穿过", "穿过了", ["person", "animal"], ["structure:bridge", "nature:river", "area:forest,park"], {}),
    ("climb", "climbs", "climbed", "爬", "爬上了", ["person", "animal"], ["nature:mountain", "plant:tree", "structure:tower,wall"], {}),
    ("love", "loves", "loved", "喜欢", "喜欢", ["person"], ["person", "animal", "readable", "plant", "area", "food"], {}),
    ("watch", "watches", "watched", "看着", "看着", ["person", "animal"], ["person", "animal", "vehicle"], {}),
]

# (base, third person singular, past, Chinese base, Chinese past, subject kinds)
INTRANSITIVE: list[tuple] = [
    ("sleep", "sleeps", "slept", "睡觉", "睡觉了", ["person", "animal"]),
    ("smile", "smiles", "smiled", "微笑", "微笑了", ["person"]),
    ("wait", "waits", "waited", "等", "等了", ["person", "animal"]),
    ("work", "works", "worked", "工作", "工作了", ["person"]),
    ("sing", "sings", "sang", "唱歌", "唱歌了", ["person", "animal:bird"]),
    ("dance", "dances", "danced", "跳舞", "跳舞了", ["person"]),
    ("play", "plays", "played", "玩", "玩了", ["person:child,girl,boy,student", "animal"]),
    ("run", "runs", "ran", "跑步", "跑步了", ["person", "animal"]),
    ("cry", "cries", "cried", "哭", "哭了", ["person"]),
    ("rest", "rests", "rested", "休息", "休息了", ["person", "animal"]),
    ("read", "reads", "read", "看书", "看书了", ["person"]),
]

# Ditransitive: "gave the child a book" -> 给了孩子一本书; others take 给 before the verb: 给孩子买了一块蛋糕.
# (base, third person singular, past, Chinese base, Chinese past, frame, object kinds)
DITRANSITIVE: list[tuple] = [
    ("give", "gives", "gave", "给", "给了", "direct", ["readable", "object", "food", "plant:flower"]),
    ("send", "sends", "sent", "寄", "寄了", "benefactive", ["readable:letter,book", "object:photo"]),
    ("buy", "buys", "bought", "买", "买了", "benefactive", ["readable", "object", "food"]),
    ("show", "shows", "showed", "看", "看了", "benefactive", ["readable", "object", "animal"]),
]

# ----------------------------------------------------------------------------- adverbs and time

ADVERBS: list[tuple[str, str]] = [
    ("quickly", "很快地"), ("slowly", "慢慢地"), ("carefully", "仔细地"), ("quietly", "安静地"), ("suddenly", "突然"),
]

# (English, Chinese, tense)
TIMES: list[tuple[str, str, str]] = [
    ("yesterday", "昨天", "past"), ("last week", "上周", "past"), ("last night", "昨晚", "past"),
    ("this morning", "今天早上", "past"), ("every day", "每天", "present"), ("often", "经常", "present"),
    ("tomorrow", "明天", "future"), ("next week", "下周", "future"),
]

# Verbs of saying: "the teacher said that ..." -> 老师说……
SAYING: list[tuple[str, str, str, str]] = [
    ("said", "says", "说", "说"),
    ("thought", "thinks", "认为", "认为"),
    ("knew", "knows", "知道", "知道"),
]
