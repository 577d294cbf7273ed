"""The dashboard's failure answers: the one envelope (fleet.errors.envelope) as JSON, or the error page for a
person's browser, with the status the code's row of fleet.errors.Code gives unless a route has a rule of its
own (the passkey ceremonies: 403)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fleet.errors import Code, FleetError, envelope


def json_error(code: str, message: str, status: int | None = None,
               headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(envelope(code, message), status_code=Code(code).status if status is None else status,
                        headers=headers)


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or "application/json" in request.headers.get("accept", "")


def error_response(request: Request, exc: FleetError) -> Response:
    """A refused request: the envelope for a script or the page's own script, the error page for a person."""
    if wants_json(request):
        return json_error(exc.code, exc.message)
    from web.pages import render  # web.pages registers the pages whose routes answer with this: imported late

    return render(request, "error.html", {"status": exc.status, "message": exc.message}, exc.status)
