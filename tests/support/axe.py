"""axe-core (tests/js, `npm --prefix tests/js ci`) over a console page: the WCAG 2 A/AA
rules' serious and critical violations. The tab must bypass the CSP (`tab(...,
bypass_csp=True)`): the test injects axe's own script."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page

AXE_JS = Path(__file__).resolve().parents[1] / "js" / "node_modules" / "axe-core" / "axe.min.js"


def serious_violations(page: Page) -> list[str]:
    """Each serious or critical violation as `rule: the elements' selectors`."""
    assert AXE_JS.exists(), "run `npm --prefix tests/js ci` first"
    page.add_script_tag(path=str(AXE_JS))
    found: list[str] = page.evaluate(
        """async () => (await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']}))
            .violations.filter(v => ['serious', 'critical'].includes(v.impact))
            .map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(', '))"""
    )
    return found
