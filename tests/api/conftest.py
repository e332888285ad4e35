import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import create_app


@pytest.fixture
def sched():
    return FakeScheduler()


@pytest.fixture
def app(sched):
    return create_app(make_state(sched))


@pytest.fixture
def client(app):
    with TestClient(app) as c:
        yield c
