"""The 401 page's Sign in link (web/error_pages.py): it carries the address asked for as
``/?next=…`` only when that is a path of this server a browser can be sent back to."""

from __future__ import annotations

import pytest

from noteloom.web.error_pages import error_page, same_origin_path, sign_in_link


@pytest.mark.parametrize("address", ["/attachments/ab", "/notes/1?x=2", "/search?q=a%20b", "/plugins/p/page"])
def test_a_path_of_this_server_is_sent_back_to(address: str) -> None:
    assert same_origin_path(address)
    assert sign_in_link(address).startswith("/?next=%2F")


@pytest.mark.parametrize("address", ["//evil.example/x", "https://evil.example/", "/\\evil.example", "\\\\evil",
                                     "/a\\b", "/a\nb", "/a\x00", "evil.example", "", "javascript:alert(1)"])
def test_anything_else_is_refused(address: str) -> None:
    assert not same_origin_path(address)
    assert sign_in_link(address) == "/"


@pytest.mark.parametrize("address", ["/", "/api", "/api/v1/notes", "/api/v1/notes?limit=5"])
def test_the_home_and_the_api_are_not_gone_back_to(address: str) -> None:
    assert sign_in_link(address) == "/"


def test_the_401_page_links_to_the_sign_in_with_the_address() -> None:
    page = error_page(401, "/attachments/0123", "download=1").decode()
    assert 'href="/?next=%2Fattachments%2F0123%3Fdownload%3D1"' in page
    assert 'href="/"' not in page.split('class="actions"')[1].split("</div>")[0]
