"""The dashboard's failure answers as JSON: the one envelope (fleet.errors.envelope), with the status the
code's row of fleet.errors.Code gives unless a route has a rule of its own (the passkey ceremonies: 403)."""

from __future__ import annotations

from starlette.responses import JSONResponse

from fleet.errors import Code, envelope


def json_error(code: str, message: str, status: int | None = None,
               headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(envelope(code, message), status_code=Code(code).status if status is None else status,
                        headers=headers)
