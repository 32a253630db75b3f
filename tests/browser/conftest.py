"""Pages rendered by a real browser: headless Chromium, its console watched, offline.

``nox -s browser`` installs Chromium from Debian's packages when it is missing; without a
``chromium`` binary on PATH these tests skip, saying so, and the default ``nox`` stays
pip-only.

How a page is checked: a copy of it gets a *probe*, a small script put first in its
``<head>``, that records every uncaught error, unhandled rejection, ``console.error`` and
resource that failed to load into a ``<pre id="raytrace-kit-probe">``, and, a second after
the page has loaded, writes each picture's laid-out box (every ``svg``, ``.mark`` and
flame graph ``.frame``) into a ``data-probe-box`` attribute. Chromium runs the copy with
``--dump-dom`` and no network at all (every host name fails to resolve, so anything
fetched at view time is a failed load), and the test reads the probe back from the DOM.
A page whose scripts do not run at all has no probe element: that fails too.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")

PROBE = """<script>
(function () {
  var seen = [];
  function note(text) {
    seen.push(String(text));
    var box = document.getElementById("raytrace-kit-probe");
    if (box) { box.textContent = JSON.stringify(seen); }
  }
  window.addEventListener("error", function (event) {
    var source = event.target && (event.target.src || event.target.href);
    note(source ? "failed to load " + source : "uncaught " + event.message);
  }, true);
  window.addEventListener("unhandledrejection", function (event) {
    note("unhandled rejection " + event.reason);
  });
  var original = console.error;
  console.error = function () {
    note("console.error " + Array.prototype.join.call(arguments, " "));
    return original.apply(console, arguments);
  };
  function measure() {
    document.querySelectorAll("svg, .mark, .frame").forEach(function (shape) {
      var box = shape.getBoundingClientRect();
      shape.setAttribute("data-probe-box", [box.x, box.y, box.width, box.height].join(","));
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var box = document.createElement("pre");
    box.id = "raytrace-kit-probe";
    box.textContent = JSON.stringify(seen);
    document.body.appendChild(box);
  });
  window.addEventListener("load", function () { setTimeout(measure, 1000); });
})();
</script>"""

_PROBED = re.compile(r'<pre id="raytrace-kit-probe">(.*?)</pre>', re.DOTALL)


@dataclass(frozen=True)
class Rendered:
    """A page as Chromium left it: its DOM, and what went wrong while it rendered."""

    dom: str
    errors: list[str]  # uncaught errors, rejections, console.error calls, failed loads


@dataclass(frozen=True)
class Browser:
    """Headless Chromium, run once per page."""

    binary: str
    profile: Path  # its own user data dir: no state shared with another Chromium

    def _run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        command = [
            self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={self.profile}", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", *arguments,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    def render(self, page: Path) -> Rendered:
        """Render a copy of ``page`` with the probe in it: its DOM and its errors."""
        text = page.read_text(encoding="utf-8")
        head = re.search(r"<head[^>]*>", text, re.IGNORECASE)
        at = head.end() if head else 0
        probed = page.with_name(f"probed-{page.name}")
        probed.write_text(text[:at] + PROBE + text[at:], encoding="utf-8")
        done = self._run("--window-size=1200,1600", "--dump-dom", probed.as_uri())
        found = _PROBED.search(done.stdout)
        assert found is not None, f"the probe never ran in {page}: {done.stderr[-2000:]}"
        errors = json.loads(html.unescape(found.group(1)))
        # What the console printed before the probe could listen (a page's own head).
        errors += [
            line for line in done.stderr.splitlines() if "CONSOLE" in line and "Uncaught" in line
        ]
        return Rendered(done.stdout, errors)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Browser:
    """Headless Chromium; the test skips when there is none."""
    binary = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    if binary is None:
        pytest.skip(
            f"no Chromium on PATH ({', '.join(CHROMIUM)}): `nox -s browser` installs Debian's"
        )
    return Browser(binary, tmp_path_factory.mktemp("chromium-profile"))
