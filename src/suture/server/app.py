"""The FastAPI app of `suture serve`: a thin translation of HTTP to `Index` calls and back.

Routes (all JSON; `/docs` shows them with their schemas):

    GET    /healthz                   liveness, no key needed
    GET    /metrics                   Prometheus text                        read
    GET    /v1/info                   index, policies, limits                read
    POST   /v1/retrieve               one policy's context                   read
    POST   /v1/compare                several policies, one query embedding  read
    GET    /v1/documents?id=          a stored document's text (any id)      read
    GET    /v1/documents/{doc_id}     the same, the id as a path             read
    POST   /v1/documents              add (JSON text or a file upload): job  write
    DELETE /v1/documents?id=          delete (or a JSON body {doc_id}): job  write
    DELETE /v1/documents/{doc_id}     the same, the id as a path             write
    GET    /v1/jobs/{job_id}          a write job's state and progress       read
    PUT    /v1/defaults/{policy}      the index's own settings: a job        write
    DELETE /v1/defaults/{policy}      forget them: a job                     write
    GET    /v1/reports[/view|/file]   `suture eval` reports under --reports  read
    GET    /, /reports                the pages (static; they call the API)
    GET    /docs, /redoc              Swagger UI, ReDoc (served locally: fastapi-offline)
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from suture._registry import lookup
from suture._version import __version__
from suture.documents import SUPPORTED_SUFFIXES, doc_id_problem, document_from_record, shown_id
from suture.exceptions import ConfigurationError, DocumentError, SutureError
from suture.explain import HEADERS, QUIET_DECISIONS
from suture.filters import Filter
from suture.policies import (
    COMPARED_POLICIES,
    DEFAULT_POLICY,
    policy_compared,
    policy_names,
    policy_settings,
)
from suture.policies.budget import DEFAULT_BUDGET
from suture.retrievers import RetrieverName, retriever_request_options, retriever_settings
from suture.server import reports
from suture.server.auth import Scope
from suture.server.limits import MAX_JSON_DEPTH, BodyLimit, JsonDepthLimit, JsonRefused, read_json
from suture.server.metrics import Metrics, MetricsMiddleware
from suture.server.models import (
    CompareRequest,
    CompareResponse,
    ContextResponse,
    DocumentAddress,
    DocumentResponse,
    ErrorResponse,
    JobResponse,
    PolicyDefaultsRequest,
    RetrieveRequest,
    TextDocument,
)
from suture.server.service import IndexService, ReadTimeout
from suture.server.settings import ServerSettings

log = logging.getLogger("suture.server")
STATIC = Path(__file__).parent / "static"


#: `?id=`: a document named in the query string, which carries any id (a path segment
#: cannot carry a line break: Starlette's `{path}` converter does not match one)
DocumentIdQuery = Annotated[str, Query(alias="id", description="The document's id.")]

#: `?wait=true` on a write: answer when its job ends (or when the request time limit passes)
WaitForJob = Annotated[bool, Query(
    description="Answer when the job ends (or when the request time limit passes).")]


class ApiError(Exception):
    """An error answered as `{"error": code, "message": message}` with an HTTP status."""

    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def create_app(service: IndexService, settings: ServerSettings) -> FastAPI:
    """The app serving `service`'s index under `settings`' keys and limits."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        service.close()

    # /docs and /redoc load Swagger UI and ReDoc from the fastapi-offline package, not a
    # CDN, so they work on a machine without internet; no validator badge is fetched
    app = FastAPIOffline(
        swagger_ui_parameters={"validatorUrl": None},
        title="suture",
        version=__version__,
        description="Context assembly for RAG: SCAR, SproutRAG and their baselines over one "
        "index. Send `Authorization: Bearer KEY` when the server has API keys.",
        lifespan=lifespan,
    )
    metrics = Metrics(service)
    _errors(app)
    read, write = _auth(settings, Scope.READ), _auth(settings, Scope.WRITE)
    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 413, 422, 504)
    }

    @app.get("/healthz", tags=["service"])
    def healthz() -> dict[str, str]:
        """Liveness: the index is open and the model loaded (no key needed)."""
        return {"status": "ok"}

    @app.get("/metrics", tags=["service"], dependencies=[read],
             response_class=PlainTextResponse)
    def prometheus() -> Response:
        """Prometheus text: request counts and latencies by route, index size, jobs."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/info", tags=["index"], dependencies=[read], responses=errors)
    async def info() -> dict[str, Any]:
        """The index (documents, chunks, embedder, settings), policies and limits."""
        return {
            "suture_version": __version__,
            "index": await service.read(service.info),
            "policies": policy_names(),
            "retrievers": [r.value for r in RetrieverName],
            "request_retriever_options": {
                name.value: list(options) for name in RetrieverName
                if (options := retriever_request_options(name.value))},
            "request_policy_parameters": {
                name: [item.name for item in policy_settings(name).fields() if item.spec.request]
                for name in policy_names()},
            "default_policy": DEFAULT_POLICY.value,
            "default_budget": DEFAULT_BUDGET,
            "compared_policies": list(COMPARED_POLICIES),
            "policy_status": await service.read(lambda: _policy_status(service)),
            "trace_headers": HEADERS,
            "trace_quiet_decisions": list(QUIET_DECISIONS),
            "limits": {
                "max_body_bytes": settings.max_body_bytes,
                "max_query_chars": settings.max_query_chars,
                "max_json_depth": MAX_JSON_DEPTH,
                "request_timeout_s": settings.request_timeout_s,
            },
            "auth": settings.keys.enabled,
        }

    @app.post("/v1/retrieve", tags=["retrieval"], dependencies=[read],
              response_model=ContextResponse, responses=errors)
    async def retrieve(body: RetrieveRequest) -> dict[str, Any]:
        """One policy's context: the same JSON as `suture query --json`."""
        _check_query(body.query, settings)
        params = _policy_params(body.policy, body.params, settings)
        options = _retriever_options(body.retriever, body.retriever_options)
        wanted = Filter.parse(body.filter)  # a bad one is a 400 naming the key
        context = await service.read(lambda: service.retrieve(
            body.query, body.policy, body.k, retriever=body.retriever,
            retriever_options=options, budget=body.budget,
            budget_unit=body.budget_unit, explain=body.explain,
            focus=body.focus, filter=wanted, **params))
        return context.to_dict()

    @app.post("/v1/compare", tags=["retrieval"], dependencies=[read],
              response_model=CompareResponse, responses=errors)
    async def compare(body: CompareRequest) -> dict[str, Any]:
        """Several policies on one question (the query is embedded once)."""
        _check_query(body.query, settings)
        for name in body.policies:
            if name in policy_names() and not policy_compared(name):
                raise ApiError(400, "invalid_request", _not_compared(name))
        options = _retriever_options(body.retriever, body.retriever_options)
        wanted = Filter.parse(body.filter)
        contexts = await service.read(lambda: service.compare(
            body.query, body.policies, body.k, retriever=body.retriever,
            retriever_options=options, budget=body.budget,
            budget_unit=body.budget_unit, explain=body.explain,
            focus=body.focus, filter=wanted))
        return {"contexts": [c.to_dict() for c in contexts]}

    async def read_document(doc_id: str) -> dict[str, Any]:
        try:
            found = await service.read(lambda: service.document(doc_id))
        except KeyError:
            raise ApiError(404, "not_found",
                           f"no document {shown_id(doc_id)} in the index") from None
        return {"doc_id": found.doc_id, "title": found.title, "text": found.text,
                "metadata": dict(found.metadata), "source": found.source}

    @app.get("/v1/documents", tags=["documents"], dependencies=[read],
             response_model=DocumentResponse, responses=errors)
    async def document_by_id(doc_id: DocumentIdQuery) -> dict[str, Any]:
        """A stored document's extracted text, named by `?id=` (any id, line breaks
        included; the path form below cannot carry a line break)."""
        return await read_document(doc_id)

    @app.get("/v1/documents/{doc_id:path}", tags=["documents"], dependencies=[read],
             response_model=DocumentResponse, responses=errors)
    async def document(doc_id: str) -> dict[str, Any]:
        """A stored document's extracted text (span offsets index into it)."""
        return await read_document(doc_id)

    @app.post("/v1/documents", tags=["documents"], dependencies=[write], status_code=202,
              response_model=JobResponse, responses=errors, openapi_extra=_UPLOAD_SCHEMA)
    async def add_document(
        request: Request,
        response: Response,
        wait: WaitForJob = False,
    ) -> dict[str, Any]:
        """Add or replace a document, as a JSON `TextDocument` or a multipart file upload.

        Returns a job (202); the document is in the index once the job has `succeeded`.
        Readers keep answering from the previous state until then.
        """
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "application/json":
            job = service.submit_text(await _text_document(request))
        elif kind == "multipart/form-data":
            job = await _upload(request, service)
        else:
            raise ApiError(415, "unsupported_media_type",
                           "send application/json {doc_id, text, title?, metadata?} or a "
                           "multipart/form-data upload with a `file` field")
        return await _job_answer(job, wait, response, service)

    async def delete(doc_id: str, response: Response, wait: bool) -> dict[str, Any]:
        if not service.jobs.pending(doc_id) and not await service.read(
            lambda: service.has_document(doc_id)
        ):
            raise ApiError(404, "not_found", f"no document {shown_id(doc_id)} in the index")
        return await _job_answer(service.submit_delete(doc_id), wait, response, service)

    @app.delete("/v1/documents", tags=["documents"], dependencies=[write],
                status_code=202, response_model=JobResponse, responses=errors)
    async def delete_document_by_id(
        response: Response,
        doc_id: Annotated[str | None, Query(
            alias="id", description="The document's id (or send a JSON body).")] = None,
        body: Annotated[DocumentAddress | None, Body(
            description="The document's id, for any id `?id=` cannot carry (one longer "
            "than a URL may be, stored by an older suture).")] = None,
        wait: WaitForJob = False,
    ) -> dict[str, Any]:
        """Delete the document named by `?id=` or by a JSON body `{doc_id}`: any stored
        id, line breaks included (a job, run after every write queued before it)."""
        if (doc_id is None) == (body is None):
            raise ApiError(400, "invalid_request", "name one document to delete: ?id=ID or "
                           "a JSON body {\"doc_id\": ID}")
        named = body.doc_id if body is not None else doc_id
        assert named is not None
        return await delete(named, response, wait)

    @app.delete("/v1/documents/{doc_id:path}", tags=["documents"], dependencies=[write],
                status_code=202, response_model=JobResponse, responses=errors)
    async def delete_document(
        doc_id: str, response: Response,
        wait: WaitForJob = False,
    ) -> dict[str, Any]:
        """Delete a document (a job, run after every write queued before it)."""
        return await delete(doc_id, response, wait)

    @app.put("/v1/defaults/{policy}", tags=["index"], dependencies=[write], status_code=202,
             response_model=JobResponse, responses=errors)
    async def set_policy_defaults(
        policy: str, body: PolicyDefaultsRequest, response: Response,
        wait: WaitForJob = False,
    ) -> dict[str, Any]:
        """Store settings as the index's own for `policy` (as `suture defaults` does):
        every later request of that policy without its own `params` uses them, the default
        pipeline's too. Checked before the job is queued; merged into what is stored."""
        job = service.submit_policy_defaults(policy, dict(body.params), body.retriever)
        return await _job_answer(job, wait, response, service)

    @app.delete("/v1/defaults/{policy}", tags=["index"], dependencies=[write],
                status_code=202, response_model=JobResponse, responses=errors)
    async def clear_policy_defaults(
        policy: str, response: Response,
        wait: WaitForJob = False,
    ) -> dict[str, Any]:
        """Forget the index's own settings for `policy` (suture's own apply again)."""
        return await _job_answer(service.submit_clear_policy_defaults(policy), wait,
                                 response, service)

    @app.get("/v1/jobs/{job_id}", tags=["documents"], dependencies=[read],
             response_model=JobResponse, responses=errors)
    def job_status(job_id: str) -> dict[str, Any]:
        """A write job: state, stage (and every stage so far with its seconds), progress of
        the current stage (chunks embedded, then documents given sentence vectors), result
        or error."""
        job = service.jobs.get(job_id)
        if job is None:
            raise ApiError(404, "not_found", f"no job {job_id!r} (jobs are kept in memory; "
                           "the last 1000 finished ones are remembered)")
        return service.jobs.snapshot(job)

    @app.get("/v1/reports", tags=["reports"], dependencies=[read])
    def report_list() -> dict[str, Any]:
        """`suture eval` output folders found under the server's --reports folder."""
        return {"reports": sorted(reports.find(settings.reports))}

    @app.get("/v1/reports/view", tags=["reports"], dependencies=[read], responses=errors)
    def report_view(name: str) -> dict[str, str]:
        """One report as HTML; its plots point at /v1/reports/file."""
        folder = reports.find(settings.reports).get(name)
        if folder is None:
            raise ApiError(404, "not_found", f"no report {name!r}; see /v1/reports")
        return {"name": name, "html": reports.render(name, folder)}

    @app.get("/v1/reports/file", tags=["reports"], dependencies=[read], responses=errors)
    def report_file(name: str, file: str) -> FileResponse:
        """A plot of a report (only image files directly in its folder)."""
        folder = reports.find(settings.reports).get(name)
        path = None if folder is None else reports.images(folder).get(file)
        if path is None:
            raise ApiError(404, "not_found", f"no image {file!r} in report {name!r}")
        return FileResponse(path)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/reports", include_in_schema=False)
    def reports_page() -> FileResponse:
        return FileResponse(STATIC / "reports.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                           allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(JsonDepthLimit, max_depth=MAX_JSON_DEPTH)  # inside the size limit
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


# -- authentication -------------------------------------------------------------------------
_bearer = HTTPBearer(auto_error=False, description="An API key from SUTURE_API_KEYS / --api-keys.")


def _auth(settings: ServerSettings, needed: Scope) -> Any:
    """A dependency: 401 without a known key, 403 for a read key on a write route."""

    def check(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        if not settings.keys.enabled:
            return
        challenge = {"WWW-Authenticate": "Bearer"}
        if credentials is None:
            raise ApiError(401, "unauthorized",
                           "this server needs an API key: send Authorization: Bearer KEY",
                           challenge)
        scope = settings.keys.scope_of(credentials.credentials)
        if scope is None:
            raise ApiError(401, "unauthorized", "unknown API key", challenge)
        if not scope.allows(needed):
            raise ApiError(403, "forbidden",
                           f"this key has {scope.value} scope; this route needs a "
                           f"{needed.value} key")

    return Depends(check)


# -- requests -------------------------------------------------------------------------------
def _not_compared(policy: str) -> str:
    """Why /v1/compare refuses `policy` (`Policy.compared`: it needs a setting given)."""
    return (f"compare runs policies at their defaults and {policy} needs a parameter "
            f"first; ask /v1/retrieve for {policy}")


def _policy_status(service: IndexService) -> dict[str, dict[str, Any]]:
    """Per policy: whether it can run on this index (`available`, else the `reason` with
    the command that fixes it) and whether /v1/compare runs it (`compare`)."""
    status = {}
    for name, missing in service.missing_policies().items():
        status[name] = {"available": missing is None, "reason": missing,
                        "compare": policy_compared(name)}
    return status


def _check_query(query: str, settings: ServerSettings) -> None:
    if len(query) > settings.max_query_chars:
        raise ApiError(422, "query_too_long",
                       f"the query has {len(query)} characters; this server accepts at most "
                       f"{settings.max_query_chars} (suture serve --max-query-chars)")


def _retriever_options(retriever: str | None, options: dict[str, Any]
                       ) -> dict[str, Any] | None:
    """The request's retriever options (None: the retriever's own): only those that change
    how hits are scored. The others (BM25's k1, b, stopwords, ...) would make and save
    another index of the corpus per request; they are the index's to set."""
    if not options:
        return None
    if retriever is None:
        raise ApiError(400, "invalid_request",
                       "retriever_options need the retriever they are for; name it, e.g. "
                       '{"retriever": "dense-sentences", "retriever_options": '
                       '{"lexical_weight": 0.3}}')
    name = lookup("retriever", RetrieverName, retriever)
    allowed = retriever_request_options(name.value)
    refused = sorted(set(options) - set(allowed))
    if refused:
        fields = [retriever_settings(name.value).resolve(option) for option in refused]
        why = "".join(f"{note}; " for note in dict.fromkeys(
            item.spec.request_note for item in fields if item and item.spec.request_note))
        may = (f"a request may set {', '.join(allowed)}" if allowed
               else "a request may set none of its options")
        raise ApiError(400, "invalid_request",
                       f"retriever {name.value!r}: {', '.join(map(repr, refused))} cannot be "
                       f"set by a request ({why}{may}); set it on the index: suture index "
                       f"--retriever {name.value} --retriever-param NAME=VALUE")
    return options


def _policy_params(policy: str, params: dict[str, Any], settings: ServerSettings
                   ) -> dict[str, Any]:
    """The request's policy parameters, less those its settings keep from requests (a path,
    such as rerank's model, is the server's to choose: `ServerSettings.policy_params`)."""
    kept = policy_settings(policy)
    for name in params:
        item = kept.resolve(name)
        if item is not None and not item.spec.request:
            raise ApiError(400, "invalid_request",
                           f"a request cannot set {policy}'s {item.name}; "
                           f"{item.spec.request_note}")
    return {**params, **settings.policy_params.get(policy, {})}


async def _text_document(request: Request) -> Any:
    try:
        body = read_json(await request.body())
    except JsonRefused as exc:
        raise ApiError(400, "invalid_request", str(exc)) from None
    try:
        checked = TextDocument.model_validate(body)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from None
    try:
        return document_from_record(checked.model_dump(), "api")
    except DocumentError as exc:
        raise ApiError(400, "invalid_request", str(exc)) from None


async def _upload(request: Request, service: IndexService) -> Any:
    """A multipart upload queued as a job; the form (and its spooled file) is closed
    whatever the answer."""
    async with request.form(max_files=1, max_fields=8) as form:
        return await _queue_upload(form, service)


async def _queue_upload(form: FormData, service: IndexService) -> Any:
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise ApiError(400, "invalid_request", "the upload needs a `file` field with the file")
    filename = upload.filename or ""
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise ApiError(400, "invalid_request",
                       f"{filename}: unsupported file type {suffix or '(no extension)'}; "
                       f"supported: {', '.join(SUPPORTED_SUFFIXES)}")
    fields = {name: form.get(name) for name in ("doc_id", "title", "metadata")}
    if any(value is not None and not isinstance(value, str) for value in fields.values()):
        raise ApiError(400, "invalid_request", "doc_id, title and metadata are text fields")
    doc_id, title, raw_metadata = (v if isinstance(v, str) else None for v in fields.values())
    if suffix == ".jsonl" and doc_id:
        raise ApiError(400, "invalid_request",
                       "a JSONL upload's records carry their own doc_id; drop the doc_id field")
    try:
        metadata = read_json(raw_metadata, "the metadata field") if raw_metadata else {}
    except JsonRefused as exc:
        raise ApiError(400, "invalid_request", f"{exc}; send a JSON object") from None
    if not isinstance(metadata, dict):
        raise ApiError(400, "invalid_request", "metadata must be a JSON object")
    effective_id = doc_id or (None if suffix == ".jsonl" else filename)
    problem = None if effective_id is None else doc_id_problem(effective_id)
    if problem is not None:
        raise ApiError(400, "invalid_request", problem)
    data = await upload.read()
    return service.submit_upload(data, filename, suffix, effective_id, title, metadata)


async def _job_answer(job: Any, wait: bool, response: Response, service: IndexService
                      ) -> dict[str, Any]:
    response.headers["Location"] = f"/v1/jobs/{job.job_id}"
    if wait:
        deadline = asyncio.get_running_loop().time() + service.timeout_s
        while not job.ended.is_set() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        if job.ended.is_set():
            response.status_code = 200
    return service.jobs.snapshot(job)


# -- errors ---------------------------------------------------------------------------------
def _errors(app: FastAPI) -> None:
    """Every error as `{"error", "message"}`; never a stack trace."""

    def answer(status: int, code: str, message: str,
               headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": code, "message": message}, status, headers=headers)

    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return answer(exc.status, exc.code, exc.message, exc.headers)

    async def suture_error(_: Request, exc: SutureError) -> JSONResponse:
        if isinstance(exc, ConfigurationError | DocumentError):
            return answer(400, "invalid_request", str(exc))
        return answer(500, type(exc).__name__.rstrip("_").lower(), str(exc))

    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            if error.get("type") == "json_invalid":  # FastAPI's: name what JSON said
                where = error.get("loc", ("", "?"))[-1]
                problems.append(f"the body is not valid JSON: {error.get('ctx', {}).get('error')}"
                                f" (at character {where})")
                continue
            where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
            problems.append(f"{where}: {error.get('msg')}" if where else str(error.get("msg")))
        return answer(422, "invalid_request", "; ".join(problems))

    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed",
                 413: "too_large"}
        code = codes.get(exc.status_code, "http_error")
        cause = exc.__cause__
        if exc.status_code == 400 and isinstance(cause, ValueError | RecursionError):
            # FastAPI's "error parsing the body" hides why: a JSON body that is not UTF-8,
            # a number of thousands of digits, ...
            return answer(400, "invalid_request", f"the body is not valid JSON: {cause}")
        return answer(exc.status_code, code, str(exc.detail), getattr(exc, "headers", None))

    async def timeout(_: Request, exc: ReadTimeout) -> JSONResponse:
        return answer(504, "timeout", str(exc))

    async def internal(_: Request, exc: Exception) -> JSONResponse:
        incident = uuid.uuid4().hex[:12]
        log.error("internal error %s", incident, exc_info=exc)
        return answer(500, "internal_error",
                      f"internal error (logged on the server as {incident})")

    handlers: dict[Any, Callable[[Request, Any], Awaitable[JSONResponse]]] = {
        ApiError: api_error, SutureError: suture_error, RequestValidationError: invalid,
        StarletteHTTPException: http_error, ReadTimeout: timeout, Exception: internal,
    }
    for kind, handler in handlers.items():
        app.add_exception_handler(kind, handler)


#: OpenAPI for POST /v1/documents, which reads its body itself (JSON or a file upload)
_UPLOAD_SCHEMA: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": TextDocument.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary",
                                 "description": f"One of {', '.join(SUPPORTED_SUFFIXES)}; "
                                 "a .jsonl file may hold many documents."},
                        "doc_id": {"type": "string",
                                   "description": "Default: the file's name. Never a path."},
                        "title": {"type": "string"},
                        "metadata": {"type": "string", "description": "A JSON object."},
                    },
                }
            },
        },
    }
}


__all__ = ["ApiError", "create_app"]
