"""/docs: Swagger UI from files this install ships (the fastapi-offline package's copy of
swagger-ui-dist), so the page works on a host with no way to a CDN. The assets are served
under /docs/assets/, which --api-key leaves open like /docs itself."""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"


def assets_dir() -> Path:
    import fastapi_offline
    return Path(fastapi_offline.__file__).parent / "static"


def install_docs(app: FastAPI, url: str = "/docs") -> None:
    """Call on an app made with docs_url=None (FastAPI's own page loads from a CDN)."""
    app.mount(ASSETS_URL, StaticFiles(directory=str(assets_dir())), name="docs-assets")
    redirect = f"{url}/oauth2-redirect"

    @app.get(url, include_in_schema=False)
    async def swagger_ui():
        return get_swagger_ui_html(
            openapi_url=app.openapi_url, title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=redirect,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png")

    @app.get(redirect, include_in_schema=False)
    async def swagger_ui_redirect():
        return get_swagger_ui_oauth2_redirect_html()
