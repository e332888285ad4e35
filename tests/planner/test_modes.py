import pytest

from server.config import ConfigError
from server.planner.modes import resolve_kv_pages


@pytest.mark.parametrize("value,ranks,fit,mode", [
    ("off", 3, False, "off"), ("0", 1, False, "off"), ("on", 1, True, "on"),
    ("all", 1, True, "on"), ("auto", 3, True, "on"), ("auto", 2, True, "off"),
    ("auto", 2, False, "on"), ("auto", 1, True, "off"), ("", 1, True, "off"),
])
def test_modes(value, ranks, fit, mode):
    assert resolve_kv_pages(value, ranks, fit)[0] == mode


def test_all_says_it_is_on():
    assert resolve_kv_pages("all", 1, True) == ("on", "TF_KV_PAGES=all is the same as on: every stream on pages")


def test_other_values_are_refused_naming_the_variable():
    with pytest.raises(ConfigError, match=r"TF_KV_PAGES='yes' is not allowed; use one of: auto, on, off, 0, all"):
        resolve_kv_pages("yes", 1, True)
