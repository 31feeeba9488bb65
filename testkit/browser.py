"""Debian's Chromium, headless, driven by Selenium through Debian's chromedriver (never a downloaded browser or
driver), for the web view's tests and its redraw bench. The flags keep Chromium off the network: this
machine's closed network refuses its background connections."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1600,1200",
)  # fmt: skip


def browser_missing_reason() -> str | None:
    """Why no browser test can run here (None when one can)."""
    for p in (CHROMIUM, CHROMEDRIVER):
        if not p.exists():
            return f"{p} not installed (`make setup` installs Debian's chromium and chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed (scripts/setup.sh python)"
    return None


@contextlib.contextmanager
def chromium(prefix: str = "uno-ui-"):
    """A headless Chromium session (a Selenium WebDriver) with a new empty profile; quit and its profile
    removed on exit, pass or fail."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix=prefix)
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for f in (*FLAGS, f"--user-data-dir={profile}"):
        opts.add_argument(f)
    driver = None
    try:
        driver = webdriver.Chrome(options=opts, service=Service(executable_path=str(CHROMEDRIVER)))
        yield driver
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
