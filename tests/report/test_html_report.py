"""``simnode report``: the page for run and sweep folders (tables with units, ratios,
hottest links, bottlenecks, embedded plots, nothing external), its user errors (one
line, exit 2), and the page opened in headless Chromium (the ``browser`` fixture finds
one, which the README's test command installs when run as root): no console errors, every
plot decoded and non-blank.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from simnode.report.html import render_html, write_report
from simnode.report.folder import load_folder
from simnode.report.result import from_record


def flat(record: dict) -> dict:
    return from_record(record).to_dict()

IMG_SRC = re.compile(r'<img [^>]*src="([^"]*)"')


def assert_self_contained(page: str) -> None:
    srcs = IMG_SRC.findall(page)
    assert srcs and all(re.fullmatch(r"data:image/png;base64,[A-Za-z0-9+/=]+", s) for s in srcs)
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    assert not re.search(r"(https?:|ftp:|file:|//[a-z0-9])", text, re.I), "external URL in the page"
    assert "<script" not in text and "<link" not in text and "@import" not in text and "url(" not in text
    assert not re.search(r'\b(src|href)="[^"]', text), "a reference outside the embedded images"


def headers(page: str) -> list[str]:
    return re.findall(r"<th>(.*?)</th>", page)


def test_run_report_gemm(gemm_run_dir, cli):
    res = cli("report", gemm_run_dir)
    assert res.code == 0 and res.err == "", res.err
    out = gemm_run_dir / "report.html"
    assert res.out.strip() == f"wrote {out}"
    page = out.read_text()
    assert_self_contained(page)
    assert all(re.search(r"\(.+\)$", h) for h in headers(page)), headers(page)
    assert "simulated / bound (ratio)" in headers(page) and "tflops (TFLOPS)" in headers(page)
    assert "bottleneck busy (% of makespan)" in headers(page)
    result = flat(json.loads((gemm_run_dir / "result.json").read_text()))
    assert f"{result['makespan_ns'] / result['roofline_ns']:,.3f}" in page
    assert result["bottleneck"] in page
    assert "aic (text)" in headers(page)                    # busiest pipe per core kind: a GEMM runs no AIV
    assert "aiv (text)" not in headers(page)
    aic = result["busiest_pipe_by_unit"]["aic"].replace(">", "&gt;")
    assert f'<td class="text">{aic}</td>' in page
    assert len(IMG_SRC.findall(page)) == 2                  # pipe bars and roofline position
    assert "Configuration" in page


def test_run_report_deepep(deepep_run_dir, tmp_path, cli):
    target = tmp_path / "deepep.html"
    res = cli("report", deepep_run_dir, "-o", target)
    assert res.code == 0, res.err
    page = target.read_text()
    assert_self_contained(page)
    result = flat(json.loads((deepep_run_dir / "result.json").read_text()))
    for kernel in ("dispatch", "combine"):
        assert f"{result[f'{kernel}_sim_over_bound']:,.3f}" in page
        assert f"{result[f'{kernel}_GBps']:,.1f}" in page
        for link in result[f"{kernel}_hottest_links"]:
            assert f">{link['link'].replace('>', '&gt;')}<" in page
        assert f"{kernel}: hottest_links" in page
    assert "util_frac (%)" in headers(page) and "GBps (GB/s)" in headers(page)
    assert "tflops (TFLOPS)" not in headers(page)            # DeepEP computes no FLOPs: absent
    assert all(re.search(r"\(.+\)$", h) for h in headers(page))
    assert len(IMG_SRC.findall(page)) == 2                  # link and chip utilization heat maps


def test_sweep_report(deepep_sweep_dir):
    page = write_report(deepep_sweep_dir).read_text()
    assert_self_contained(page)
    assert "num_ranks (swept value)" in headers(page)
    assert len(IMG_SRC.findall(page)) == 5                  # figures vs EP size + two heat maps per point
    for p in load_folder(deepep_sweep_dir).points:
        assert p.result.bottleneck.replace(">", "&gt;") in page
    assert render_html(load_folder(deepep_sweep_dir)) == page   # deterministic


def _error(res) -> str:
    assert res.code == 2 and res.out == ""
    assert res.err.count("\n") == 1 and res.err.startswith("simnode: error: ") and "Traceback" not in res.err
    return res.err


def test_layer_sweep_report(layer_sweep_dir):
    """A MoE layer sweep gets the time breakdown per point and every point's rank strip."""
    page = write_report(layer_sweep_dir).read_text()
    assert_self_contained(page)
    assert 'alt="MoE layer breakdown"' in page
    assert page.count('alt="per-rank breakdown') == 2
    for p in load_folder(layer_sweep_dir).points:
        assert p.result.details["straggler_reason"] in page
    assert render_html(load_folder(layer_sweep_dir)) == page


def test_missing_folder_is_an_error(tmp_path, cli):
    assert "expected an existing folder" in _error(cli("report", tmp_path / "nope"))


def test_folder_that_is_neither_run_nor_sweep_is_an_error(tmp_path, cli):
    (tmp_path / "notes.txt").write_text("hello")
    err = _error(cli("report", tmp_path))
    assert "result.json" in err and "sweep.json" in err


@pytest.mark.parametrize("name, text, expected", [
    ("result.json", "{not json", "invalid JSON at line 1 column 2"),
    ("result.json", "[1, 2]", "a JSON object holding a run result"),
    ("result.json", '{"kind": "gemm"}', "makespan_ns"),
    ("series.json", '[{"name": "u", "kernel": "k", "unit": "fraction", "bin_edges_ns": [0, 1], '
                    '"rows": {"a": [0.1, 0.2]}}]', "one value per time bin (1)"),
])
def test_unreadable_run_json_is_an_error(gemm_run_dir, cli, name, text, expected):
    (gemm_run_dir / name).write_text(text)
    err = _error(cli("report", gemm_run_dir))
    assert str(gemm_run_dir / name) in err and expected in err


def test_unreadable_sweep_json_is_an_error(deepep_sweep_dir, cli):
    (deepep_sweep_dir / "sweep.json").write_text('{"params": {}, "points": [}')
    assert "invalid JSON" in _error(cli("report", deepep_sweep_dir))
    (deepep_sweep_dir / "sweep.json").write_text('{"params": {}, "points": [{"point": {}, "dir": "points/009"}]}')
    assert "points/009/result.json" in _error(cli("report", deepep_sweep_dir))


def test_output_in_a_missing_folder_is_an_error(gemm_run_dir, tmp_path, cli):
    assert "existing folder" in _error(cli("report", gemm_run_dir, "-o", tmp_path / "no" / "r.html"))


# -- headless Chromium -------------------------------------------------------------------------

#: appended to a copy of the page (the report itself has no scripts): after load, draw every
#: image on a canvas and record its size and its share of non-white pixels in the DOM
_CHECKER = """<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("img").forEach(function (img) {
    var n = 0, ink = 0;
    if (img.complete && img.naturalWidth > 0) {
      var c = document.createElement("canvas");
      c.width = img.naturalWidth; c.height = img.naturalHeight;
      var ctx = c.getContext("2d"); ctx.drawImage(img, 0, 0);
      var d = ctx.getImageData(0, 0, c.width, c.height).data;
      for (var i = 0; i < d.length; i += 4) { n++; if (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240) ink++; }
    }
    out.push({alt: img.alt, width: img.naturalWidth, pixels: n, ink: ink});
  });
  var pre = document.createElement("pre"); pre.id = "img-check"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def chromium(browser: str, page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", *extra, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def test_console_errors_are_detected(tmp_path, browser):
    """The detector itself: a page that logs and throws is caught (so a clean run means clean)."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>console.error('x'); missingFn();</script></body></html>")
    lines = console_errors(chromium(browser, bad, tmp_path / "profile", "--dump-dom").stderr)
    assert any("Uncaught ReferenceError" in line for line in lines)


def test_report_in_headless_chromium(deepep_sweep_dir, gemm_run_dir, tmp_path, browser):
    for folder in (deepep_sweep_dir, gemm_run_dir):
        page = write_report(folder)
        shown = chromium(browser, page, tmp_path / "profile", "--dump-dom")
        assert console_errors(shown.stderr) == []
        assert "<h1>simnode report" in shown.stdout

        checked = tmp_path / f"{folder.name}-checked.html"
        checked.write_text(page.read_text().replace("</body>", _CHECKER + "</body>"))
        dom = chromium(browser, checked, tmp_path / "profile", "--dump-dom")
        assert console_errors(dom.stderr) == []
        found = re.search(r'<pre id="img-check">(.*?)</pre>', dom.stdout, re.S)
        assert found, "the image check did not run"
        images = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
        assert len(images) == len(IMG_SRC.findall(page.read_text())) >= 2
        for img in images:
            assert img["width"] > 100, f"{img['alt']} did not decode"
            assert img["ink"] / img["pixels"] > 0.02, f"{img['alt']} is blank"

    shot = tmp_path / "shot.png"
    chromium(browser, write_report(deepep_sweep_dir), tmp_path / "profile", "--window-size=1000,1400",
             f"--screenshot={shot}")
    from matplotlib import image as mpimg
    pixels = mpimg.imread(shot)[..., :3]
    assert (pixels < 0.94).any(axis=-1).mean() > 0.02, "the rendered page is blank"


def test_readme_test_command_installs_chromium_as_root_only_and_is_what_ci_runs():
    """A user without root runs the same command: the install is skipped and the browser
    test finds one or says what to install; CI (root) installs one and requires it."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    ci = (root / ".ci" / "run").read_text().strip().splitlines()
    assert f"```\n{ci[-1]}\n```" in readme
    assert ci[-1].startswith('(command -v chromium >/dev/null || [ "$(id -u)" != 0 ] || (apt-get update -q && '
                             'DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)) && ')
    assert ci[-1].endswith("python -m pytest")
    assert "export SIMNODE_REQUIRE_BROWSER=1" in ci


def test_without_a_browser_the_test_says_what_to_install(tmp_path, monkeypatch, browser_search):
    find_browser, how = browser_search
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SIMNODE_BROWSER", raising=False)
    assert find_browser() is None
    assert "apt-get install chromium" in how and "python -m playwright install chromium" in how
    monkeypatch.setenv("SIMNODE_BROWSER", str(tmp_path / "nope"))
    assert find_browser() is None


def test_report_of_real_out_folders(tmp_path, cli):
    """The folders `simnode run --out` and `simnode sweep --out` write, not only the fixtures."""
    root = Path(__file__).resolve().parents[2]
    supernode, deepep = root / "topologies" / "atlas950-supernode.yaml", root / "workloads" / "deepep-normal.yaml"
    res = cli("sweep", supernode, deepep, "--param", "num_ranks=8,16", "--set", "tokens_per_rank=256",
              "--jobs", "1", "--out", tmp_path / "ep")
    assert res.code == 0, res.err
    assert cli("report", tmp_path / "ep").code == 0
    page = (tmp_path / "ep" / "report.html").read_text()
    assert_self_contained(page)
    # bandwidth vs EP + per point a link heat map and a chip (HBM, URMA ceiling) heat map
    assert len(IMG_SRC.findall(page)) == 5
    assert page.count('alt="chip_util num_ranks=') == 2 and page.count('alt="link_util num_ranks=') == 2
    res = cli("run", root / "topologies" / "ascend950dt.yaml", root / "workloads" / "gemm-bf16-4096x7168x16384.yaml",
              "--set", "m=256", "--set", "n=512", "--set", "k=1024", "--out", tmp_path / "gemm")
    assert res.code == 0, res.err
    assert cli("report", tmp_path / "gemm").code == 0
    assert len(IMG_SRC.findall((tmp_path / "gemm" / "report.html").read_text())) == 2
