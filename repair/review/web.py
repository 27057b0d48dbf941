"""The review page: a small Starlette app on loopback, every judgment saved through CorrectionStore as it is made.

Safety: the page's script is a static file and puts data into the page with textContent only; a strict
Content-Security-Policy forbids inline scripts besides; every /api request carries the session's token
(made at start, embedded in the page) or gets 403; the Host header must be the one served (no DNS
rebinding); no request value is used as a path (assets are served from a fixed table).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
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
from repair.review.store import KINDS, SIDES, CorrectionStore, now_iso

log = logging.getLogger(__name__)

TOKEN_HEADER = "x-review-token"
ASSET_TYPES = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
ISSUE_FIELDS = ("id", "container", "container_translation", "rti", "rti_translation", "missing", "distance")
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


def _asset(name: str) -> str:
    return resources.files("repair.review").joinpath("static", name).read_text(encoding="utf-8")


def allowed_hosts(host: str) -> list[str]:
    if host in ("0.0.0.0", "::", ""):
        return ["*"]  # the person asked to serve every interface
    return sorted({host, *LOOPBACK} if host in LOOPBACK else {host})


def create_app(issues: list[dict], review_dir: str | os.PathLike, *, token: str | None = None,
               host: str = "127.0.0.1", on_finish=None) -> Starlette:
    """The ASGI app; `app.state.token` is the session token, `app.state.finished` turns True on Finish."""
    store = CorrectionStore(review_dir, issues)
    token = token or secrets.token_urlsafe(32)
    page = _asset("index.html").replace("__REVIEW_TOKEN__", token)
    assets = {name: _asset(name) for name in ASSET_TYPES}
    by_id = {i["id"]: i for i in issues}
    page_issues = [{k: i.get(k) for k in ISSUE_FIELDS} for i in issues]

    def authorised(request: Request) -> bool:
        return secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), token)

    def refused() -> Response:
        return JSONResponse({"error": "missing or wrong session token; reload the page"}, status_code=403,
                            headers=SECURITY_HEADERS)

    def answer(obj, status: int = 200) -> Response:
        return JSONResponse(obj, status_code=status, headers=SECURITY_HEADERS)

    def prefill() -> dict[str, str]:
        return {c["source"]: c["correction"] for c in store.corrections()}

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers=SECURITY_HEADERS)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in assets:
            return PlainTextResponse("not found", status_code=404, headers=SECURITY_HEADERS)
        return Response(assets[name], media_type=ASSET_TYPES[name], headers=SECURITY_HEADERS)

    async def state(request: Request) -> Response:
        if not authorised(request):
            return refused()
        return answer({"issues": page_issues, "judgments": store.latest, "stats": store.stats(),
                       "kinds": list(KINDS), "prefill": prefill(), "finished": app.state.finished})

    async def judge(request: Request) -> Response:
        if not authorised(request):
            return refused()
        try:
            body = await request.json()
        except ValueError:
            return answer({"error": "the request is not JSON"}, 400)
        if not isinstance(body, dict) or body.get("issue") not in by_id:
            return answer({"error": "unknown issue"}, 400)
        wrong = body.get("wrong")
        corrections = body.get("corrections") or {}
        if (not isinstance(wrong, list) or any(w not in SIDES for w in wrong)
                or not isinstance(corrections, dict)
                or any(not isinstance(corrections.get(s, ""), str) for s in SIDES)):
            return answer({"error": "bad judgment"}, 400)
        try:
            j = store.record(body["issue"], wrong, body.get("kind"), {s: corrections.get(s, "") for s in wrong})
        except UserError as e:
            return answer({"error": str(e)}, 400)
        return answer({"judgment": j, "stats": store.stats(), "prefill": prefill()})

    async def export(request: Request) -> Response:
        if not authorised(request):
            return refused()
        body = csv_text(sheet_rows(issues, store.latest))
        headers = {**SECURITY_HEADERS, "Content-Disposition": 'attachment; filename="review.csv"'}
        return Response(body, media_type="text/csv; charset=utf-8", headers=headers)

    async def finish(request: Request) -> Response:
        if not authorised(request):
            return refused()
        app.state.finished = True
        stats = store.stats()
        write_json_atomic(store.progress_path, {**stats, "finished": True, "time": now_iso()})
        if on_finish is not None:
            on_finish()
        return answer({"stats": stats})

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/static/{name}", asset),
            Route("/favicon.ico", lambda request: Response(status_code=204)),
            Route("/api/state", state),
            Route("/api/judge", judge, methods=["POST"]),
            Route("/api/export.csv", export),
            Route("/api/finish", finish, methods=["POST"]),
        ],
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host), www_redirect=False)],
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
                 port: int = 8765, open_browser: bool = False, on_ready=None) -> dict:
    """Serve the page until the person clicks Finish; return the review stats.

    Stopped before Finish (Ctrl-C): the judgments made are on disk, and ReviewPending says to run again.
    `on_ready(url)` is called once the server listens.
    """
    import uvicorn

    review_dir = Path(review_dir)
    if not issues:
        print("review: no issues to review", flush=True)
        store = CorrectionStore(review_dir, issues)
        write_json_atomic(store.progress_path, {**store.stats(), "finished": True, "time": now_iso()})
        return store.stats()
    sock = bind(host, port)
    server: uvicorn.Server | None = None

    def stop() -> None:
        if server is not None:
            server.should_exit = True

    app = create_app(issues, review_dir, host=host, on_finish=stop)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}/"
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    store = app.state.store
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
    stats = store.stats()
    if not app.state.finished:
        raise ReviewPending(
            f"review stopped before Finish: {stats['judged']} of {stats['total']} issues judged, saved in "
            f"{store.judgments_path}. Run the same command again to go on where you left off."
        )
    print(f"review: finished; {stats['judged']} of {stats['total']} judged, {stats['with_error']} with an error",
          flush=True)
    return stats
