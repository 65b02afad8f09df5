"""The scripted model endpoint: one HTTP server on loopback that speaks Anthropic Messages, OpenAI
Responses, OpenAI Chat Completions and Gemini generateContent, answering from a :class:`Script`.

This is the one fake of the real-agent tier (an LLM cannot run here): the CLIs are real releases,
their HTTP is real, and what they receive has the providers' own shapes (streamed where the CLI
streams, errors with the providers' status codes and bodies). Every request is recorded
(:attr:`ModelEndpoint.calls`) so a test can tell when the first failed model call was made.

Run alone for a manual try: ``python -m tests.model_endpoint.server <script.json>`` prints its URL.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from .formats import Answer, Format, format_for, structured
from .plan import Edit, Hold, Say, Script, edit_call, text_edit

MODEL = "scripted-model"


@dataclass
class Recorded:
    """One request: when (time.monotonic()), its path, its format, the tools it offered, the turn
    and the HTTP status answered."""

    at: float
    path: str
    format: str
    tools: list[str]
    turn: int
    status: int
    kind: str = ""


@dataclass
class ModelEndpoint:
    """A running scripted model server.

    Use as a context manager; ``url`` is ``http://127.0.0.1:<port>``; change ``script`` at any
    time (the next request reads it).
    """

    script: Script = field(default_factory=Script)
    calls: list[Recorded] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _released: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ModelEndpoint:
        endpoint = self

        class Handler(_Handler):
            owner = endpoint

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def model_calls(self) -> list[Recorded]:
        """The recorded calls of a model (POSTs in a known format)."""
        return [c for c in list(self.calls) if c.format]

    def first_failed_at(self) -> float | None:
        """time.monotonic() of the first model call answered with an error status, or None."""
        failed = [c.at for c in self.model_calls() if c.status >= 400]
        return min(failed) if failed else None

    def answer(self, fmt: Format, body: dict[str, Any]) -> Answer:
        """What the script says to this request."""
        schema_text = structured(fmt, body)
        tools = fmt.tools(body)
        system = fmt.system(body)
        text_edits = not tools and ("SEARCH/REPLACE" in system or "file listing" in system.lower())
        if schema_text is not None and not tools:
            return Answer(text=schema_text)
        if not tools and not text_edits:
            return Answer(text="Fix calc.add")  # a side call: a title, a summary, a topic check
        step = self.script.step(fmt.conversation(body), fmt.turn(body))
        if isinstance(step, Edit):
            if text_edits:
                return Answer(text=text_edit(step, system))
            call = edit_call(step, tools)
            if call is None:
                return Answer(text=f"No tool to edit {step.path} with; offered: {[t.name for t in tools]}")
            return Answer(call=call)
        if isinstance(step, Hold):
            self._released.wait()
            return Answer(text=step.text)
        return Answer(text=step.text)

    def hold(self) -> None:
        """From now on :class:`Hold` steps wait for :meth:`release` again."""
        self._released.clear()

    def release(self) -> None:
        """Let every held answer (:class:`Hold`) go, now and from now on."""
        self._released.set()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a CLI killed mid-call) is no error of the endpoint's."""
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: ModelEndpoint
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def _send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = urlsplit(self.path).path
        self.owner.calls.append(Recorded(time.monotonic(), path, "", [], 0, 200, "get"))
        if path.endswith("/models") and "v1beta" in path:
            self._send_json(200, {"models": [{"name": f"models/{MODEL}", "supportedGenerationMethods": [
                "generateContent", "streamGenerateContent", "countTokens"]}]})
        elif path.endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0,
                                                             "owned_by": "tests"}], "models": []})
        else:
            self._send_json(404, {"error": {"message": f"no route {path}"}})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        if path.endswith("/count_tokens") or path.endswith(":countTokens"):
            self.owner.calls.append(Recorded(time.monotonic(), path, "", [], 0, 200, "count"))
            self._send_json(200, {"input_tokens": 1200, "totalTokens": 1200})
            return
        fmt = format_for(path)
        if fmt is None:
            self.owner.calls.append(Recorded(time.monotonic(), path, "", [], 0, 404, "unknown"))
            self._send_json(404, {"error": {"message": f"no route {path}"}})
            return
        script = self.owner.script
        tools = [t.name for t in fmt.tools(body)]
        status = script.fail or 200
        self.owner.calls.append(Recorded(time.monotonic(), path, fmt.name, tools, fmt.turn(body), status))
        if script.hang:
            self.owner._stopping.wait()
            return
        if script.delay_s:
            self.owner._stopping.wait(script.delay_s)
        if script.fail:
            headers = {"retry-after": "2"} if script.fail == 429 else {}
            self._send_json(script.fail, fmt.error(script.fail), headers)
            return
        answer = self.owner.answer(fmt, body)
        model = str(body.get("model") or MODEL)
        if not fmt.streaming(path, body):
            self._send_json(200, fmt.whole(answer, model))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for chunk in fmt.stream(answer, model):
                self.wfile.write(chunk)
                self.wfile.flush()
                if script.chunk_delay_s:
                    self.owner._stopping.wait(script.chunk_delay_s)
        except (BrokenPipeError, ConnectionResetError):
            return


def main() -> None:  # pragma: no cover - a manual tool
    import sys

    from .plan import Plan

    raw = json.loads(open(sys.argv[1]).read()) if len(sys.argv) > 1 else {}
    plans = [Plan([Edit(**s["edit"]) if "edit" in s else Say(s.get("say", "done")) for s in p["steps"]],
                  p.get("match", "")) for p in raw.get("plans", [])]
    script = Script(plans, raw.get("fail"), bool(raw.get("hang")))
    with ModelEndpoint(script) as endpoint:
        print(endpoint.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":  # pragma: no cover
    main()
