"""/docs works offline: the page names only local assets, and they are served (also under
--api-key, like /docs)."""
import re

from fastapi.testclient import TestClient

from api_fakes import make_state
from server.api import create_app


def test_docs_page_loads_swagger_ui_from_this_server():
    state = make_state()
    state.api_keys = ("k",)
    with TestClient(create_app(state)) as c:
        page = c.get("/docs")
        assert page.status_code == 200 and "SwaggerUIBundle" in page.text
        urls = re.findall(r'(?:src|href)="([^"]+)"', page.text) + re.findall(r"url: '([^']+)'", page.text)
        assert urls and not [u for u in urls if "://" in u], urls       # nothing from a CDN
        for u in urls:
            r = c.get(u)
            assert r.status_code == 200, (u, r.status_code)
        js = c.get("/docs/assets/swagger-ui-bundle.js")
        assert len(js.content) > 100_000 and "javascript" in js.headers["content-type"]
        assert c.get("/openapi.json").json()["info"]["title"] == "foldserve"
