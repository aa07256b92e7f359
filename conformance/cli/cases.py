"""``amqp-conformance cases``: the case catalogue (ids, levels, rules, sources), the spec-rule
coverage (``--rules``) and the wire invariants (``--invariants``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pluggy import HookimplMarker

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.argparsing import command_parser
from conformance.cli import EXIT_BAD_INPUT, _err
from conformance.scenarios import areas_of

if TYPE_CHECKING:

    from conformance.model.cases import Case

# pytest.hookimpl. pytest and the plugin are imported where used: ``report`` starts ~0.2 s sooner.
hookimpl = HookimplMarker("pytest")






def cases_main(argv: Sequence[str]) -> int:
    p = command_parser("cases", "List the suite's cases.")
    p.add_argument("--rules", action="store_true", help="spec-rule coverage: every rule against its cases")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--markdown", action="store_true",
                   help="case and area counts as the docs page docs/cases.md")
    p.add_argument("--area", action="append", default=[],
                   help="only these areas (repeatable, or a comma list)")
    p.add_argument("--invariants", action="store_true",
                   help="the wire invariants checked under every case (a violation makes the case FAIL)")
    args = p.parse_args(list(argv))
    try:
        areas = areas_of(args.area)
    except ValueError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    if args.invariants:
        return _print_invariants(as_json=args.json)
    from conformance.scenarios import all_cases

    cases = [c for c in all_cases() if not areas or c.area in areas]
    if args.rules:
        return _print_rule_coverage(cases, as_json=args.json)
    if args.markdown:
        from conformance.cli.casetable import cases_markdown

        print(cases_markdown(cases), end="")
        return 0
    if args.json:
        print(json.dumps([c.as_dict() for c in cases], indent=1))
        return 0
    width = max((len(c.id) for c in cases), default=10)
    for c in cases:
        print(f"{c.id:<{width}}  {c.level.value:<9} {','.join(c.rules) or '-'}")
    areas = sorted({c.area for c in cases})
    print(f"{len(cases)} cases in {len(areas)} areas: {', '.join(areas)}")
    return 0


def _print_invariants(*, as_json: bool) -> int:
    from dataclasses import asdict

    from conformance.protocol.invariants import INVARIANTS

    if as_json:
        print(json.dumps([asdict(i) for i in INVARIANTS], indent=1))
        return 0
    for i in INVARIANTS:
        print(f"{i.id}\n    {i.text}\n    rule: {i.rule}")
    print(f"{len(INVARIANTS)} wire invariants, checked on every raw-client frame of every case")
    return 0


def _print_rule_coverage(cases: Sequence[Case], *, as_json: bool) -> int:
    from conformance.model.coverage import rule_coverage

    rows = rule_coverage(cases)
    checked = sum(1 for r in rows if r.cases)
    uncheckable = sum(1 for r in rows if not r.cases and r.reason)
    missing = [r for r in rows if not r.cases and not r.reason]
    if as_json:
        print(json.dumps([r.as_dict() for r in rows], indent=1))
    else:
        width = max(len(r.rule.id) for r in rows)
        for r in rows:
            status = ", ".join(r.cases[:4]) + (f" (+{len(r.cases) - 4})" if len(r.cases) > 4 else "") \
                if r.cases else (f"not checkable: {r.reason}" if r.reason else "NOT COVERED")
            print(f"{r.rule.id:<{width}}  {r.rule.level:<6} {status}")
        total = len(rows)
        print(f"rules: {total}; checked by cases: {checked} ({100 * checked / total:.0f}%); "
              f"not checkable from a client: {uncheckable}; not covered: {len(missing)}")
    return 1 if missing else 0
