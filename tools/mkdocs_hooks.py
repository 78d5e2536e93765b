"""mkdocs hooks (mkdocs.yml ``hooks:``) for the documentation site.

mkdocs-click 0.9 prints an option's default with ``str(option.default)``; since click 8.3 an
option without a default holds click's ``UNSET`` sentinel there, so the command-line reference
showed ``Sentinel.UNSET`` for every such option. Until mkdocs-click handles it, its table row is
built from a copy of the option whose default is None, which it renders as "None" (or
"_required"), as it did before click 8.3. tests/docs/test_api_reference.py fails if the sentinel
reaches the site again.
"""

from __future__ import annotations

import copy
from typing import Any

import click
import mkdocs_click._docs as click_docs

_UNSET: Any = getattr(getattr(click, "core", None), "UNSET", None)
_original_row = click_docs._format_table_option_row


def _option_row(option: click.Option) -> str:
    if _UNSET is not None and option.default is _UNSET:
        option = copy.copy(option)
        option.default = None
    return _original_row(option)


def on_startup(**kwargs: Any) -> None:
    click_docs._format_table_option_row = _option_row
