"""The review page: a small Starlette app, every judgment saved through CorrectionStore as it is made.

Safety: the page's script is a static file and puts data into the page with textContent only; a strict
Content-Security-Policy forbids inline scripts besides, and every response carries the security headers;
every /api request carries the session's token (made at start, handed out only in the printed address's
#fragment, never in a page) or gets 403; the Host header must be a name the page is served under (no DNS
rebinding); no request value is used as a path (assets are served from a fixed table); request bodies over
MAX_BODY bytes get 413, malformed ones 400. Serving beyond loopback needs `public=True`.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import secrets
import socket
import sys
import threading
import webbrowser
from importlib import resources
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from repair.errors import UserError
from repair.fileio import write_json_atomic
from repair.review.sheet import ReviewPending, csv_text, sheet_rows
from repair.purity.relations import describe
from repair.review.align import ProjectedPrefills
from repair.review.memory import PageMemory
from repair.review.store import KINDS, CorrectionStore, now_iso

log = logging.getLogger(__name__)

TOKEN_HEADER = "x-review-token"
ASSET_TYPES = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
ANY = ("0.0.0.0", "::", "")
MAX_BODY = 2 * 1024 * 1024  # two 100 kB corrections fit many times over; a 20 MB body does not


def _asset(name: str) -> str:
    return resources.files("repair.review").joinpath("static", name).read_text(encoding="utf-8")


def is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str, names: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Host header values the page answers to: the address served and the `names` given, never any name."""
    allowed = {host, *names} - set(ANY)
    if is_loopback(host) or host in ANY:
        allowed |= set(LOOPBACK)
    if host in ANY:
        allowed |= {socket.gethostname(), socket.getfqdn()}
    return sorted(allowed)


def check_exposure(host: str, public: bool) -> None:
    """Refuse a non-loopback address unless asked for; warn when it is."""
    if is_loopback(host):
        return
    shown = host or "every interface"
    if not public:
        raise UserError(
            f"serving the review page on {shown} opens it to anyone who can reach this machine's port, over plain "
            "HTTP. Serve on 127.0.0.1 and reach it through an SSH tunnel (ssh -L 8765:127.0.0.1:8765 HOST), or "
            "allow it explicitly: review.public=true (--public)"
        )
    print(f"review: WARNING: serving on {shown}, beyond this machine. Anyone who can reach the port gets the "
          "page; only the printed address (its #token) shows the issues and changes the review: give it to the "
          "reviewer alone. Plain HTTP, so the token crosses the network unencrypted: use a network you trust.",
          file=sys.stderr, flush=True)


class SecurityHeaders:
    """ASGI middleware: the security headers on every response, the ones Starlette makes itself (404, 400) too."""

    def __init__(self, app):
        self.app = app
        self.headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *((k, v) for k, v in self.headers if k not in present)]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def read_json_body(request: Request) -> object:
    """The request's JSON, or BadRequest: 413 over MAX_BODY bytes (by its header or as it streams), 400 if not JSON."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise BadRequest(413, f"the request is larger than {MAX_BODY:,} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise BadRequest(413, f"the request is larger than {MAX_BODY:,} bytes")
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise BadRequest(400, "the request is not JSON (UTF-8)") from None
    except RecursionError:
        raise BadRequest(400, "the request's JSON is nested too deeply") from None


def parse_judgment(body: object, by_id: dict[str, dict]) -> tuple[str, list[str], str | None, dict[str, str], dict | None]:
    """A posted judgment's issue, sides marked wrong, kind, corrections (one per side marked wrong) and how
    each was made; BadRequest (400) saying what is wrong with it."""
    if not isinstance(body, dict):
        raise BadRequest(400, "a judgment must be a JSON object")
    issue, wrong, kind = body.get("issue"), body.get("wrong"), body.get("kind")
    corrections = body.get("corrections") or {}
    if not isinstance(issue, str) or issue not in by_id:
        raise BadRequest(400, "unknown issue")
    names = [s["role"] for s in by_id[issue]["sides"]]
    if (not isinstance(wrong, list) or any(not isinstance(w, str) or w not in names for w in wrong)
            or not isinstance(corrections, dict)
            or any(not isinstance(corrections.get(s, ""), str) for s in names)
            or not (kind is None or isinstance(kind, str))):
        raise BadRequest(400, f"bad judgment: 'wrong' must list sides of the issue ({' / '.join(names)}), "
                              "'kind' be a text and 'corrections' map each side to a text")
    how = body.get("how")
    if how is not None and not isinstance(how, dict):
        raise BadRequest(400, "bad judgment: 'how' must map each wrong side to {origin, typed}")
    return issue, wrong, kind, {s: corrections.get(s, "") for s in wrong}, how


def answer(obj, status: int = 200) -> Response:
    return JSONResponse(obj, status_code=status, headers=SECURITY_HEADERS)


def refused() -> Response:
    return JSONResponse({"error": "missing or wrong session token; open the address the review command printed"},
                        status_code=403, headers=SECURITY_HEADERS)


def static_routes() -> list[Route]:
    """The page and its assets (no token needed: they hold no issue)."""
    page = _asset("index.html")
    assets = {name: _asset(name) for name in ASSET_TYPES}

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers=SECURITY_HEADERS)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in assets:
            return PlainTextResponse("not found", status_code=404, headers=SECURITY_HEADERS)
        return Response(assets[name], media_type=ASSET_TYPES[name], headers=SECURITY_HEADERS)

    return [Route("/", index), Route("/static/{name}", asset),
            Route("/favicon.ico", lambda request: Response(status_code=204))]


def page_offers(issues: list[dict], store: CorrectionStore, memory, prefills: ProjectedPrefills):
    """What the page's answers offer beside the pre-fills: the review memory's suggestions (`memory`) and the
    projections of the corrected sentences onto their phrases (`projected`)."""
    remembered = PageMemory(memory, issues, store).offers
    return lambda: {"memory": remembered(), "projected": prefills(store.prefill())}


def parse_projection(body: object, sentences: set[str]) -> tuple[str, str]:
    """A draft correction of a sentence to project onto its phrases before it is saved: (sentence, correction);
    BadRequest (400) saying what is wrong with it."""
    if not isinstance(body, dict) or not isinstance(body.get("sentence"), str) \
            or not isinstance(body.get("correction"), str):
        raise BadRequest(400, "a projection request must be a JSON object with 'sentence' and 'correction' texts")
    if body["sentence"] not in sentences:
        raise BadRequest(400, "unknown sentence: not the sentence of any issue of this review")
    return body["sentence"], body["correction"]


def export_handler(issues: list[dict], store: CorrectionStore, authorised):
    """GET /api/export.csv: the judgments so far as the review sheet."""
    async def export(request: Request) -> Response:
        if not authorised(request):
            return refused()
        body = csv_text(sheet_rows(issues, store.latest))
        headers = {**SECURITY_HEADERS, "Content-Disposition": 'attachment; filename="review.csv"'}
        return Response(body, media_type="text/csv; charset=utf-8", headers=headers)

    return export


async def server_error(request: Request, exc: Exception) -> Response:
    return PlainTextResponse("internal error; the server's log says more", status_code=500, headers=SECURITY_HEADERS)


def projection_handler(issues: list[dict], prefills: ProjectedPrefills, authorised):
    """POST /api/project: the projection of a sentence's correction, not yet saved, onto the phrases cut from it:
    what the page pre-fills a phrase side of the same issue with as soon as its sentence is corrected (nothing is
    recorded)."""
    sentences = {i["sentence"] for i in issues if i.get("sentence")}

    async def project(request: Request) -> Response:
        if not authorised(request):
            return refused()
        try:
            sentence, correction = parse_projection(await read_json_body(request), sentences)
        except BadRequest as e:
            return answer({"error": str(e)}, e.status)
        return answer({"projected": prefills({sentence: correction.strip() or None})})

    return project


def create_app(issues: list[dict], review_dir: str | os.PathLike, *, token: str | None = None,
               host: str = "127.0.0.1", hosts: list[str] | tuple[str, ...] = (), on_finish=None,
               memory=None, aligner=None) -> Starlette:
    """The ASGI app; `app.state.token` is the session token, `app.state.finished` turns True on Finish.

    It opens the review folder's CorrectionStore (the folder's one writer until `app.state.store.close()`).
    `memory`: a MemorySuggester; `aligner`: a repair.review.align.PhraseAligner (page_offers).
    """
    store = CorrectionStore(review_dir, issues)
    token = token or secrets.token_urlsafe(32)
    by_id = {i["id"]: i for i in issues}
    relations = {name: describe(name) for name in dict.fromkeys(i["relation"] for i in issues)}

    def authorised(request: Request) -> bool:
        return secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), token)

    prefills = ProjectedPrefills(aligner, issues)
    offers = page_offers(issues, store, memory, prefills)

    async def state(request: Request) -> Response:
        if not authorised(request):
            return refused()
        return answer({"issues": issues, "judgments": store.latest, "stats": store.stats(),
                       "kinds": list(KINDS), "prefill": store.prefill(), "finished": app.state.finished, "relations": relations,
                       **offers()})

    async def judge(request: Request) -> Response:
        if not authorised(request):
            return refused()
        try:
            body = await read_json_body(request)
            issue, wrong, kind, corrections, how = parse_judgment(body, by_id)
        except BadRequest as e:
            return answer({"error": str(e)}, e.status)
        try:
            j = store.record(issue, wrong, kind, corrections, how=how)
        except UserError as e:
            return answer({"error": str(e)}, 400)
        # the pre-fills this judgment can change, its sides' sources' (None: withdrawn), not every one
        changed = store.prefill(s["source"] for s in by_id[issue]["sides"])
        return answer({"judgment": j, "stats": store.stats(), "prefill": changed, **offers()})

    async def finish(request: Request) -> Response:
        if not authorised(request):
            return refused()
        app.state.finished = True
        store.sync()
        stats = store.stats()
        write_json_atomic(store.progress_path, {**stats, "finished": True, "time": now_iso()})
        if on_finish is not None:
            on_finish()
        return answer({"stats": stats})

    app = Starlette(
        exception_handlers={500: server_error},
        routes=[
            *static_routes(),
            Route("/api/state", state),
            Route("/api/judge", judge, methods=["POST"]),
            Route("/api/project", projection_handler(issues, prefills, authorised), methods=["POST"]),
            Route("/api/export.csv", export_handler(issues, store, authorised)),
            Route("/api/finish", finish, methods=["POST"]),
        ],
        middleware=[Middleware(SecurityHeaders),
                    Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host, hosts), www_redirect=False)],
    )
    app.state.token = token
    app.state.finished = False
    app.state.store = store
    return app


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or one clear message when the port is taken (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UserError(f"cannot serve the review page on {host}:{port} ({e.strerror}); choose another port "
                        "(--port N, or review.port=N in the loop)") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve_review(issues: list[dict], review_dir: str | os.PathLike, *, host: str = "127.0.0.1",
                 port: int = 8765, open_browser: bool = False, on_ready=None, public: bool = False,
                 hosts: list[str] | tuple[str, ...] = (), memory=None, aligner=None) -> dict:
    """Serve the page until the person clicks Finish; return the review stats.

    Stopped before Finish (Ctrl-C): the judgments made are on disk, and ReviewPending says to run again.
    `on_ready(url)` is called once the server listens; `url` carries the session token in its #fragment.
    A host beyond loopback needs `public=True`; `hosts`: more names the page may be reached by.
    """
    import uvicorn

    check_exposure(host, public)
    review_dir = Path(review_dir)
    if not issues:
        print("review: no issues to review", flush=True)
        with CorrectionStore(review_dir, issues) as store:
            write_json_atomic(store.progress_path, {**store.stats(), "finished": True, "time": now_iso()})
            return store.stats()
    server: uvicorn.Server | None = None

    def stop() -> None:
        if server is not None:
            server.should_exit = True

    app = create_app(issues, review_dir, host=host, hosts=hosts, on_finish=stop, memory=memory,
                     aligner=aligner)
    store = app.state.store
    try:
        sock = bind(host, port)
        name = socket.gethostname() if host in ANY else host
        shown = f"[{name}]" if ":" in name else name
        url = f"http://{shown}:{sock.getsockname()[1]}/#token={app.state.token}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        server = uvicorn.Server(config)
        s = store.stats()
        print(f"review: {s['total']} issues ({s['judged']} judged already). Open {url} in a browser; "
              "Finish on the page ends the review, Ctrl-C stops it (judgments made are kept).", flush=True)
        if open_browser:
            threading.Timer(0.5, webbrowser.open, [url]).start()
        if on_ready is not None:
            threading.Timer(0.0, on_ready, [url]).start()
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:
            pass
        finally:
            sock.close()
        store.sync()
        stats = store.stats()
    finally:
        store.close()
    if not app.state.finished:
        raise ReviewPending(
            f"review stopped before Finish: {stats['judged']} of {stats['total']} issues judged, saved in "
            f"{store.judgments_path}. Run the same command again to go on where you left off."
        )
    print(f"review: finished; {stats['judged']} of {stats['total']} judged, {stats['with_error']} with an error",
          flush=True)
    return stats
