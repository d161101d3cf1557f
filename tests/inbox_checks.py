"""What the inbox's third-pass tests check on any page, in the browser: nothing wider
than the screen, every tap target at least 44 px each way, and no word of Vicar's own
machinery (a CfA tag, a guard's name, an exception's name, an environment variable) in
what a reviewer reads; plus a waiting gate made in one call."""

from __future__ import annotations

import asyncio
import os
import re

from vicar.client.gates import start_gate

from .conftest import wait_escalated

TAP_PX = 44  # the least a finger can hit (Apple's and WCAG 2.5.5's figure)
# What a reviewer must not read: the details stay behind "the numbers" and in the logs.
JARGON = re.compile(
    r"\b(?:INTENT|PLAN|WORK)_ASSERT\b"
    r"|\bVICAR_[A-Z_]+\b"
    r"|\b[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:Error|Refused|Exception|Conflict)\b"
    r"|\b(?:cold_start|proxy_error|passthrough|probation|staleness|unproven|untrusted)\b"
    r"|\bguard\b|escalation mode|\btraceback\b",
    re.I,
)


def jargon_in(text: str) -> list[str]:
    """Each word of the machinery found, with the words around it (to say where)."""
    return sorted({f"{m.group(0)}: …{text[max(0, m.start() - 60) : m.end() + 30]}…" for m in JARGON.finditer(text)})


READER_TEXT_JS = """() => {
  // A closed <details> keeps its content in the layout (content-visibility), so innerText
  // would read it: hide it for the reading, then put it back.
  const hidden = [];
  for (const d of document.querySelectorAll('details:not([open])')) {
    for (const child of d.children) {
      if (child.tagName !== 'SUMMARY' && child.style.display !== 'none') {
        hidden.push(child);
        child.style.display = 'none';
      }
    }
    for (const node of d.childNodes) {
      if (node.nodeType === Node.TEXT_NODE && node.textContent.trim()) {
        const span = document.createElement('span'); span.dataset.wrapped = '1';
        node.replaceWith(span); span.append(node); span.style.display = 'none'; hidden.push(span);
      }
    }
  }
  const text = document.body.innerText;
  for (const el of hidden) {
    if (el.dataset.wrapped) el.replaceWith(...el.childNodes); else el.style.display = '';
  }
  return text;
}"""


async def reader_text(page) -> str:
    """What the page shows a reader: closed <details> (the numbers) hold their content back."""
    return await page.evaluate(READER_TEXT_JS)


async def overflow(page) -> int:
    """How far the page runs past the screen's width (0: it does not)."""
    return await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


SMALL_TARGETS_JS = """(least) => {
  const out = [];
  const sel = 'a[href], button, summary, select, textarea, input:not([type=hidden])';
  for (const el of document.querySelectorAll(sel)) {
    let t = el;
    if (el.matches('input[type=checkbox], input[type=radio]')) { t = el.closest('label') || el; }
    if (!t.getClientRects().length) continue;            // not rendered (a closed <details>, display: none)
    const r = t.getBoundingClientRect();
    if (getComputedStyle(t).visibility === 'hidden' || r.width === 0) continue;
    if (r.width < least - 0.5 || r.height < least - 0.5) {
      const said = (el.innerText || el.value || el.getAttribute('aria-label') || el.name || '').trim().slice(0, 40);
      out.push(`${el.tagName.toLowerCase()}${el.className ? '.' + el.className : ''} "${said}" `
        + `${Math.round(r.width)}x${Math.round(r.height)}`);
    }
  }
  return out;
}"""


async def small_targets(page) -> list[str]:
    """Every visible link, button, summary and field smaller than TAP_PX either way (a
    checkbox counts as the label around it: that is where a finger lands)."""
    return await page.evaluate(SMALL_TARGETS_JS, TAP_PX)


async def waiting(w, **kw) -> str:
    """A gate that asks alice every time, escalated: its workflow id."""
    kw.setdefault("escalation_mode", "always")
    gate = await start_gate(w.h.client, w.h.request(w.p, **kw), w.h.task_queue)
    await wait_escalated(w.h.client, gate.id)
    return gate.id


def held_gates(w) -> set[str]:
    from vicar.inbox.held import held_gates as held

    return held(w.h.settings.data_dir, "alice")


def card(page, wid: str):
    return page.locator("li.gate", has=page.locator(f'input[value="{wid}"], a[href="/gates/{wid}"]'))


async def shot(page, name: str, whole_page: bool = True) -> None:
    """docs/img/<name> with VICAR_SCREENSHOTS=1, once the page's buttons are live (they
    wait a second: a picture of them greyed out would mislead); `whole_page` False: what
    the screen shows."""
    from .inbox_world import DOCS_IMG

    if os.environ.get("VICAR_SCREENSHOTS") == "1":
        await asyncio.sleep(1.1)
        await page.screenshot(path=str(DOCS_IMG / name), full_page=whole_page)
