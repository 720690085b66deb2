// The live timeline on a constructed history (end2end/fixtures/timeline-scale.sql, served by
// the third server of playwright.config.ts): 5 000 runs by 200 workers in the last 15 minutes,
// and task 900001 re-claimed twice across three workers. Prints the render figures that
// BENCHMARKS.md quotes.
import { test, expect, Page, hydrated } from "./support";
import { execFileSync } from "node:child_process";

const scaleURL = process.env.E2E_SCALE_URL ?? "http://127.0.0.1:3102";

// The time between animation frames (ms) for `ms` milliseconds: what a user sees as smooth or janky.
function frameTimes(page: Page, ms: number): Promise<number[]> {
  return page.evaluate(
    (ms) =>
      new Promise<number[]>((resolve) => {
        const out: number[] = [];
        let last = performance.now();
        const end = last + ms;
        const tick = (t: number) => {
          out.push(t - last);
          last = t;
          if (t < end) requestAnimationFrame(tick);
          else resolve(out);
        };
        requestAnimationFrame(tick);
      }),
    ms,
  );
}


/** Writes a finished, acted run by `worker` now, into the fixture database the server reads. */
function writeActedRun(worker: string) {
  execFileSync("sqlite3", [
    process.env.E2E_SCALE_DB!,
    `INSERT INTO tasks (kind, source, safety, status, lease_epoch, attempts, created_at, updated_at)
       VALUES ('reply', 'notification', 'idempotent', 'completed', 1, 1,
               strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'), strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
     INSERT INTO runs (task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, output, completion_rows)
       VALUES (last_insert_rowid(), '${worker}', 1, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '-1 seconds'),
               strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '+29 seconds'),
               strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'), 'acted: replied', 1);`,
  ]);
}

test("a task re-claimed twice across three workers is drawn as two links with their reasons", { tag: "@sqlite-fixture" }, async ({ page }) => {
  await page.goto(`${scaleURL}/timeline?minutes=15&lanes=400&order=name`);
  await hydrated(page);
  const links = page.locator('.timeline path.reclaim[data-task="900001"]');
  await expect(links).toHaveCount(2);
  const ends = await links.evaluateAll((els) =>
    els.map((e) => [e.getAttribute("data-from-run"), e.getAttribute("data-to-run"), e.getAttribute("class")]),
  );
  expect(ends).toEqual([
    // worker-a never claimed again after its lease lapsed; worker-b's write lost its lease.
    ["900001", "900002", "reclaim reason-dead_worker"],
    ["900002", "900003", "reclaim reason-slow_worker"],
  ]);
  // Each link starts in the lane of the attempt it leaves and ends in the lane of the next one.
  const laneOf = async (worker: string) => {
    const r = (await page.locator(`.timeline .swimlane[data-lane="${worker}"] .lane-bg`).boundingBox())!;
    return [r.y, r.y + r.height];
  };
  const [a, b, c] = [await laneOf("worker-a"), await laneOf("worker-b"), await laneOf("worker-c")];
  const path = async (i: number) => (await links.nth(i).getAttribute("d"))!;
  const svg = (await page.locator(".timeline svg").boundingBox())!;
  const scale = svg.width / 1000; // the chart is drawn 1000 units wide
  const ys = (d: string) => {
    const nums = d.match(/-?\d+(\.\d+)?/g)!.map(Number);
    return [svg.y + nums[1] * scale, svg.y + nums[nums.length - 1] * scale];
  };
  const [s0, e0] = ys(await path(0));
  const [s1, e1] = ys(await path(1));
  const inside = (y: number, [top, bottom]: number[]) => y > top && y < bottom;
  expect(inside(s0, a) && inside(e0, b), "dead worker: worker-a → worker-b").toBe(true);
  expect(inside(s1, b) && inside(e1, c), "slow worker: worker-b → worker-c").toBe(true);

  // Focusing the lost-lease attempt lights its task up in all three lanes and says what it was.
  // Its lanes sort last by name: scrolled to, their marks are drawn.
  await page.locator('.timeline .swimlane[data-lane="worker-c"]').scrollIntoViewIfNeeded();
  await page.locator('.timeline a.bar-link[data-run="900002"]').focus();
  // The keyboard's tooltip: task, kind, worker, epoch, state, times and the output's prefix.
  const detail = page.getByTestId("timeline-detail");
  for (const part of ["task #900001", "(charge_card)", "worker-b", "epoch 2", "lost lease", "“acted: charged card”"])
    await expect(detail).toContainText(part);
  await expect(detail).toContainText(/\d\d:\d\d:\d\d → \d\d:\d\d:\d\d \(68\.0 s\) UTC/);
  // The lost lease and the re-claims carry their glyphs, and no two glyphs overlap.
  await expect(page.locator('.timeline [data-glyph="lost_lease"][data-run="900002"]')).toBeAttached();
  const glyphBoxes = await page.locator(".timeline [data-glyph]").evaluateAll((els) =>
    els.map((e) => {
      const r = e.getBoundingClientRect();
      return [r.x, r.y, r.width, r.height];
    }),
  );
  expect(glyphBoxes.length).toBeGreaterThan(0);
  for (let i = 0; i < glyphBoxes.length; i++)
    for (let j = i + 1; j < glyphBoxes.length; j++) {
      const [a, b] = [glyphBoxes[i], glyphBoxes[j]];
      expect(a[0] < b[0] + b[2] && b[0] < a[0] + a[2] && a[1] < b[1] + b[3] && b[1] < a[1] + a[3], `glyphs ${i} and ${j}`).toBe(false);
    }
  const litRuns = () =>
    page
      .locator(".timeline a.bar-link")
      .evaluateAll((els) => els.filter((e) => getComputedStyle(e).opacity === "1").map((e) => e.getAttribute("data-run")).sort());
  expect(await litRuns()).toEqual(["900001", "900002", "900003"]);

  // Under the pointer, the task stays lit when a live change redraws the chart: a run written
  // now (acted, by worker-c: no lane moves or appears) arrives through the live feed and is merged in.
  await page.locator('.timeline a.bar-link[data-run="900002"]').hover();
  await expect(page.getByTestId("timeline-detail")).toContainText("task #900001");
  const drawnAt = await page.getByTestId("timeline").getAttribute("data-now");
  writeActedRun("worker-c");
  await expect(page.getByTestId("timeline")).not.toHaveAttribute("data-now", drawnAt!, { timeout: 20_000 });
  expect(await litRuns()).toEqual(["900001", "900002", "900003"]);

  // Under keyboard focus, the same through a redraw of the focused bar's own lane: the bar is
  // a new element then, and focus moves to it (not to the page), so the task stays lit and Tab
  // goes on from where it was.
  await page.mouse.move(0, 0);
  await page.evaluate(() => (document.activeElement as SVGElement | null)?.blur());
  await expect(page.locator(".timeline svg")).not.toHaveClass(/focusing/);
  const focused = page.locator('.timeline a.bar-link[data-run="900002"]');
  await focused.focus();
  await focused.evaluate((e) => e.setAttribute("data-probe", "before the redraw"));
  writeActedRun("worker-b");
  await expect(page.locator(".timeline a.bar-link[data-probe]"), "worker-b's lane redrawn").toHaveCount(0, { timeout: 20_000 });
  await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("data-run"))).toBe("900002");
  await expect(page.locator(".timeline svg")).toHaveClass(/focusing/);
  await expect(page.getByTestId("timeline-detail")).toContainText("task #900001");
  expect(await litRuns()).toEqual(["900001", "900002", "900003"]);

  // Tab moves on to the next bar, and the tooltip and the highlight follow it.
  await page.keyboard.press("Tab");
  const next = await page.evaluate(() => {
    const a = document.activeElement;
    return a?.matches("a.bar-link") ? [a.getAttribute("data-run"), a.getAttribute("data-task")] : null;
  });
  expect(next, "Tab lands on another bar").not.toBeNull();
  expect(next![0]).not.toBe("900002");
  await expect(page.getByTestId("timeline-detail")).toContainText(`task #${next![1]}`);
  await expect
    .poll(() =>
      page.locator(`.timeline a.bar-link[data-run="${next![0]}"]`).evaluate((e) => getComputedStyle(e).opacity),
    )
    .toBe("1");
});

test("200 workers and 5 000 runs: lanes limited, only those on screen drawn, glyphs apart, render time measured", { tag: "@sqlite-fixture" }, async ({ page }) => {
  test.setTimeout(120_000);
  const started = Date.now();
  await page.goto(`${scaleURL}/timeline?minutes=15`);
  await hydrated(page);
  const firstHydrated = Date.now() - started;
  // Most urgent lanes first, the rest behind a link.
  const lanes = page.locator(".timeline .swimlane");
  expect(await lanes.count()).toBe(40);
  await expect(page.getByTestId("hidden-lanes")).toContainText("163 more lanes");
  const drawn = await page.evaluate(() => ({
    bars: document.querySelectorAll(".timeline a.bar-link").length,
    cells: document.querySelectorAll(".timeline .cell").length,
    failedCells: document.querySelectorAll(".timeline .cell[data-failures]:not([data-failures='0'])").length,
  }));
  expect(drawn.bars + drawn.cells).toBeGreaterThan(0);
  // The README's picture of a big fleet: the most urgent lanes, failures first, as the screen
  // shows them (lanes scrolled out of view are drawn when they scroll in, so a full-page
  // picture would show them empty).
  await page.screenshot({ path: "screenshots/timeline-fleet.png" });

  // Every lane, then frame times while the clock moves the picture (one translate a second).
  const all = Date.now();
  await page.getByRole("link", { name: "Show all lanes" }).click();
  await expect(lanes).toHaveCount(203);
  await hydrated(page);
  const allLanes = Date.now() - all;
  // Only the lanes on screen (and a margin) carry marks; scrolling draws the others.
  const marked = page.locator(".timeline .lane-marks");
  const markedAtTop = await marked.count();
  expect(markedAtTop).toBeGreaterThan(0);
  expect(markedAtTop).toBeLessThan(60);
  await expect(page.locator('.timeline .lane-marks[data-lane-index="0"]')).toBeAttached();
  await lanes.last().scrollIntoViewIfNeeded();
  await expect(page.locator('.timeline .lane-marks[data-lane-index="202"]')).toBeAttached();
  await expect(page.locator('.timeline .lane-marks[data-lane-index="0"]')).toHaveCount(0);
  expect(await marked.count()).toBeLessThan(60);
  await page.evaluate(() => window.scrollTo(0, 0));
  await expect(page.locator('.timeline .lane-marks[data-lane-index="0"]')).toBeAttached();
  const frames = await frameTimes(page, 3000);
  const sorted = [...frames].sort((x, y) => x - y);
  const p95 = sorted[Math.floor(sorted.length * 0.95)];
  const worst = sorted[sorted.length - 1];

  // Frame times while live changes arrive and are merged into the picture (no refetch): ten
  // batches of five runs, one every 300 ms, written by the top lane's worker (no lane moves).
  const topWorker = (await lanes.first().getAttribute("data-lane"))!;
  const beforeMerges = await page.getByTestId("timeline").getAttribute("data-now");
  const merging = frameTimes(page, 4000);
  const now = "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')";
  for (let batch = 0; batch < 10; batch++) {
    const rows = Array.from({ length: 5 }, (_, i) => {
      const id = 950_000 + batch * 5 + i;
      return `INSERT INTO tasks (id, kind, source, safety, status, lease_epoch, attempts, created_at, updated_at)
                VALUES (${id}, 'reply', 'notification', 'idempotent', 'completed', 1, 1, ${now}, ${now});
              INSERT INTO runs (id, task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, output, completion_rows)
                VALUES (${id}, ${id}, '${topWorker}', 1, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '-2 seconds'),
                        strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '+28 seconds'), ${now}, 'acted: merged live', 1);`;
    });
    execFileSync("sqlite3", [process.env.E2E_SCALE_DB!, rows.join("\n")]);
    await page.waitForTimeout(300);
  }
  const mergeFrames = (await merging).sort((x, y) => x - y);
  // The batches were merged into the picture (its `now` moved on; two-second runs in a
  // 15-minute window are too narrow for bars: they join the lane's density strip).
  await expect(page.getByTestId("timeline")).not.toHaveAttribute("data-now", beforeMerges!, { timeout: 10_000 });
  const mergeP95 = mergeFrames[Math.floor(mergeFrames.length * 0.95)];
  const mergeWorst = mergeFrames[mergeFrames.length - 1];
  // Frames long enough to see as a hitch (three refreshes or more).
  const mergeLong = mergeFrames.filter((f) => f > 50).length;
  const boxes = await page.locator(".timeline [data-glyph]").evaluateAll((els) =>
    els.map((e) => {
      const r = e.getBoundingClientRect();
      return [r.x, r.y, r.width, r.height];
    }),
  );
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, b] = [boxes[i], boxes[j]];
      expect(a[0] < b[0] + b[2] && b[0] < a[0] + a[2] && a[1] < b[1] + b[3] && b[1] < a[1] + a[3]).toBe(false);
    }
  // Lanes per state or per kind instead of per worker; a worker filter keeps its lane only.
  await page.goto(`${scaleURL}/timeline?minutes=15&by=state`);
  await hydrated(page);
  const stateLanes = await lanes.evaluateAll((els) => els.map((e) => e.getAttribute("data-lane")));
  expect(stateLanes).toEqual(expect.arrayContaining(["acted", "lost lease", "failed", "empty output", "silent"]));
  expect(stateLanes.length).toBe(5);
  await page.goto(`${scaleURL}/timeline?minutes=15&by=kind`);
  await expect(lanes).toHaveCount(2);
  await page.goto(`${scaleURL}/timeline?minutes=15&worker=worker-a`);
  const workerLanes = await lanes.evaluateAll((els) => els.map((e) => e.getAttribute("data-lane")));
  expect(workerLanes).toEqual(["worker-a"]);

  const figures = {
    date: new Date().toISOString(),
    // The build the server under test came from: `LASTWORD_BIN=target/release/lastword` after
    // `cargo leptos build --release` measures what users get (the suite's default is debug).
    wasm: /[\\/]release[\\/]/.test(process.env.LASTWORD_BIN ?? "") ? "release" : "debug",
    window_minutes: 15,
    runs: 5003,
    workers: 203,
    first_view_hydrated_ms: firstHydrated,
    first_view_bars: drawn.bars,
    first_view_cells: drawn.cells,
    all_lanes_ms: allLanes,
    lanes_with_marks_at_top: markedAtTop,
    frames_in_3s: frames.length,
    frame_p95_ms: Number(p95.toFixed(1)),
    frame_worst_ms: Number(worst.toFixed(1)),
    merge_batches: 10,
    merge_runs: 50,
    frames_in_4s_merging: mergeFrames.length,
    merge_frame_p95_ms: Number(mergeP95.toFixed(1)),
    merge_frame_worst_ms: Number(mergeWorst.toFixed(1)),
    merge_frames_over_50ms: mergeLong,
  };
  // `E2E_WRITE_FIGURES=1 LASTWORD_BIN=../target/release/lastword npx playwright test
  // tests/timeline.spec.ts` (after `cargo leptos build --release`) records them for
  // BENCHMARKS.md (the bench's report quotes bench/timeline-browser.json).
  if (process.env.E2E_WRITE_FIGURES === "1") {
    const fs = await import("node:fs");
    fs.writeFileSync(`${__dirname}/../../bench/timeline-browser.json`, JSON.stringify(figures, null, 2) + "\n");
  }
  console.log(
    `timeline-scale (${figures.wasm} wasm): 15 min, 5003 runs, 203 workers: first view (40 lanes) hydrated in ${firstHydrated} ms ` +
      `(${drawn.bars} bars, ${drawn.cells} density cells, ${drawn.failedCells} with failures); all 203 lanes in ${allLanes} ms (${markedAtTop} with marks drawn at the top of the page); ` +
      `frames over 3 s with the clock moving: ${frames.length}, p95 ${p95.toFixed(1)} ms, worst ${worst.toFixed(1)} ms; ` +
      `frames over 4 s while 10 live batches (50 runs) were merged: ${mergeFrames.length}, p95 ${mergeP95.toFixed(1)} ms, ${mergeLong} over 50 ms, ` +
      `worst ${mergeWorst.toFixed(1)} ms; ${boxes.length} glyphs, none overlapping`,
  );
});

test("the timeline's filters narrow lanes and runs by worker, kind and state, and the URL holds them", { tag: "@sqlite-fixture" }, async ({ page }) => {
  // Worker, typed into the form: the URL holds it, and only the lanes of matching workers stay
  // (a part of the name matches: worker-010 … worker-019).
  await page.goto(`${scaleURL}/timeline?minutes=15&order=name&lanes=400`);
  await hydrated(page);
  await expect(page.locator(".timeline .swimlane")).toHaveCount(203);
  await page.locator('input[name="worker"]').fill("worker-01");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/[?&]worker=worker-01(&|$)/);
  const lanes = page.locator(".timeline .swimlane");
  await expect(lanes).toHaveCount(10);
  const names = await lanes.evaluateAll((els) => els.map((e) => e.getAttribute("data-lane")));
  expect(names).toEqual(Array.from({ length: 10 }, (_, i) => `worker-01${i}`));

  // State: only lost leases (every 89th run's write matched nothing, and task 900001's second
  // attempt), as bars or as density cells, and no other state drawn.
  await page.goto(`${scaleURL}/timeline?minutes=15&lanes=400&state=lost_lease`);
  await hydrated(page);
  const states = await page
    .locator(".timeline a.bar-link")
    .evaluateAll((els) => [...new Set(els.map((e) => e.getAttribute("data-state")))]);
  expect(states).toEqual(["lost_lease"]);
  const cellClasses = await page.locator(".timeline rect.cell").evaluateAll((els) => els.map((e) => e.getAttribute("class")));
  for (const c of cellClasses) expect(c).toContain("state-lost_lease");
  await expect(page.locator('.timeline a.bar-link[data-run="900002"]')).toBeAttached();
  await expect(page.locator('select[name="state"]')).toHaveValue("lost_lease");

  // Kind, with one lane per kind: only charge_card's lane.
  await page.goto(`${scaleURL}/timeline?minutes=15&by=kind&kind=charge`);
  await hydrated(page);
  const kinds = await page.locator(".timeline .swimlane").evaluateAll((els) => els.map((e) => e.getAttribute("data-lane")));
  expect(kinds).toEqual(["charge_card"]);
  await expect(page.locator('input[name="kind"]')).toHaveValue("charge");
});

/** Runs `sql` on the fixture database the scale server reads. */
function fixtureSql(sql: string) {
  execFileSync("sqlite3", [process.env.E2E_SCALE_DB!, sql]);
}

/** SQLite's spelling of the time `offset` (`'-30 seconds'`) from now, as the store writes times. */
const at = (offset: string) => `strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '${offset}')`;

/** Counts the page's reads of its whole window (`get_timeline`), apart from reads of changed runs. */
function windowReads(page: Page): { n: number } {
  const reads = { n: 0 };
  page.on("request", (r) => {
    if (new URL(r.url()).pathname === "/api/fn/timeline") reads.n++;
  });
  return reads;
}

test("live: a running bar grows, ends silent the moment its lease lapses, turns lost-lease when its rejected write lands, and lights with its task's merged attempt, without reading the window again", { tag: "@sqlite-fixture" }, async ({ page }) => {
  test.setTimeout(90_000);
  const reads = windowReads(page);
  await page.goto(`${scaleURL}/timeline?minutes=5&worker=worker-live`);
  await hydrated(page);
  await expect(page.getByTestId("timeline-empty")).toBeVisible();
  const readsAtStart = reads.n;

  // Claimed 30 s ago under a lease that lapses in 12 s; no heartbeat comes.
  const lapsesAt = Date.now() + 12_000;
  fixtureSql(`INSERT INTO tasks (id, kind, source, safety, status, owner, lease_epoch, lease_expires_at, attempts, created_at, updated_at)
      VALUES (960001, 'reply', 'notification', 'idempotent', 'leased', 'worker-live', 1, ${at("+12 seconds")}, 1, ${at("-30 seconds")}, ${at("-30 seconds")});
    INSERT INTO runs (id, task_id, worker, lease_epoch, claimed_at, lease_expires_at)
      VALUES (960001, 960001, 'worker-live', 1, ${at("-30 seconds")}, ${at("+12 seconds")});`);
  const bar = page.locator('.timeline a.bar-link[data-run="960001"]');
  await expect(bar, "the run appears, running").toHaveAttribute("data-state", "running", { timeout: 10_000 });
  const width = async () => Number(await bar.locator("rect").getAttribute("width"));
  const before = await width();
  await page.waitForTimeout(1500);
  expect(await width(), "a running bar grows with the clock").toBeGreaterThan(before);

  // Silent the moment its lease lapses (the page's clock ticks once a second), and it stops there.
  await expect(bar).toHaveAttribute("data-state", "silent", { timeout: 20_000 });
  const late = Date.now() - lapsesAt;
  expect(late, "turned silent before its lease lapsed").toBeGreaterThan(-1000);
  expect(late, "turned silent long after its lease lapsed").toBeLessThan(4000);
  const atLapse = await width();
  await page.waitForTimeout(2000);
  expect(await width(), "a silent bar ends at its lapse, it does not grow").toBeCloseTo(atLapse, 0);

  // The worker's late write lands and matches nothing (another claim took the task): lost lease,
  // with its glyph, as soon as the change arrives.
  fixtureSql(`UPDATE runs SET finished_at = ${at("+0 seconds")}, output = 'acted: replied, too late', completion_rows = 0
      WHERE id = 960001;`);
  await expect(bar).toHaveAttribute("data-state", "lost_lease", { timeout: 10_000 });
  await expect(page.locator('.timeline [data-glyph="lost_lease"][data-run="960001"]')).toBeAttached();

  // The task's next attempt, half a second long (merged into the lane's density strip), and
  // another task's, a minute earlier: pointing at the lost lease lights the cell holding its
  // task's attempt and dims the other.
  fixtureSql(`INSERT INTO runs (id, task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, output, completion_rows)
      VALUES (960002, 960001, 'worker-live', 2, ${at("-2 seconds")}, ${at("+28 seconds")}, ${at("-1.5 seconds")}, 'no action needed', 1);
    INSERT INTO tasks (id, kind, source, safety, status, lease_epoch, attempts, created_at, updated_at)
      VALUES (960003, 'reply', 'notification', 'idempotent', 'completed', 1, 1, ${at("-60 seconds")}, ${at("-60 seconds")});
    INSERT INTO runs (id, task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, output, completion_rows)
      VALUES (960003, 960003, 'worker-live', 1, ${at("-60 seconds")}, ${at("-30 seconds")}, ${at("-59.5 seconds")}, 'skip', 1);`);
  const ownCell = page.locator('.timeline rect.cell[data-tasks~="960001"]');
  const otherCell = page.locator('.timeline rect.cell[data-tasks~="960003"]');
  await expect(ownCell).toBeAttached({ timeout: 10_000 });
  await expect(otherCell).toBeAttached();
  await page.getByTestId("pause").click();
  await bar.hover();
  await expect(page.locator(".timeline svg")).toHaveClass(/focusing/);
  await expect.poll(() => ownCell.evaluate((e) => getComputedStyle(e).opacity)).toBe("1");
  await expect.poll(() => otherCell.evaluate((e) => getComputedStyle(e).opacity)).toBe("0.22");
  expect(reads.n, "live changes were merged in: the window was not read again").toBe(readsAtStart);
});

test("paused, the timeline holds what arrives, says how much waits, and merges it in on Resume without reading the window again", { tag: "@sqlite-fixture" }, async ({ page }) => {
  const reads = windowReads(page);
  await page.goto(`${scaleURL}/timeline?minutes=5&worker=worker-paused`);
  await hydrated(page);
  await expect(page.getByTestId("timeline-empty")).toBeVisible();
  const readsAtStart = reads.n;
  await page.getByTestId("pause").click();
  await expect(page.getByTestId("pause")).toHaveAttribute("aria-pressed", "true");
  fixtureSql(`INSERT INTO tasks (id, kind, source, safety, status, lease_epoch, attempts, created_at, updated_at)
      VALUES (960101, 'reply', 'notification', 'idempotent', 'completed', 1, 1, ${at("-40 seconds")}, ${at("-1 seconds")});
    INSERT INTO runs (id, task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, output, completion_rows)
      VALUES (960101, 960101, 'worker-paused', 1, ${at("-40 seconds")}, ${at("-10 seconds")}, ${at("-1 seconds")}, 'acted: replied', 1);`);
  await expect(page.getByTestId("waiting")).toHaveText(/^\d+ updates? waiting$/, { timeout: 10_000 });
  await page.waitForTimeout(1500);
  await expect(page.locator('.timeline a.bar-link[data-run="960101"]'), "held back while paused").toHaveCount(0);
  await expect(page.getByTestId("timeline-empty")).toBeVisible();
  await page.getByTestId("pause").click();
  await expect(page.locator('.timeline a.bar-link[data-run="960101"]')).toHaveAttribute("data-state", "acted", { timeout: 10_000 });
  await expect(page.getByTestId("waiting")).toHaveText("");
  expect(reads.n, "what waited was merged in: the window was not read again").toBe(readsAtStart);
});

test("the timeline reads without colour, in both themes: every state, failure cell and re-claim reason has a shape of its own, and the legend draws each reason's stroke", { tag: "@sqlite-fixture" }, async ({ page }) => {
  for (const colorScheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme });
    await page.goto(`${scaleURL}/timeline?minutes=15`);
    await hydrated(page);
    // Each class drawn once in the chart, as the page styles it; the shape is everything but hue.
    const shapes = await page.locator(".timeline svg").evaluate((svg) => {
      const ns = "http://www.w3.org/2000/svg";
      const shape = (tag: string, cls: string) => {
        const el = document.createElementNS(ns, tag);
        el.setAttribute("class", cls);
        svg.appendChild(el);
        const s = getComputedStyle(el);
        const fill = s.fill.startsWith("url(") ? "pattern" : "paint";
        const out = [fill, s.fillOpacity, s.strokeWidth, s.strokeDasharray].join(" / ");
        el.remove();
        return out;
      };
      const states = ["acted", "no_action", "skip", "running", "failed", "silent", "lost_lease", "empty_output"];
      const reasons = ["slow_worker", "stalled_worker", "dead_worker", "retry", "operator_requeue"];
      return {
        bars: states.map((s) => shape("rect", `bar state-${s}`)),
        healthyCell: shape("rect", "cell state-acted"),
        failureCells: ["failed", "silent", "lost_lease", "empty_output"].map((s) => shape("rect", `cell state-${s}`)),
        links: reasons.map((r) => shape("path", `reclaim reason-${r}`)),
        reasons,
      };
    });
    expect(new Set(shapes.bars).size, `${colorScheme}: bar shapes ${shapes.bars.join(" | ")}`).toBe(shapes.bars.length);
    const cells = [shapes.healthyCell, ...shapes.failureCells];
    expect(new Set(cells).size, `${colorScheme}: cell shapes ${cells.join(" | ")}`).toBe(cells.length);
    expect(new Set(shapes.links).size, `${colorScheme}: link shapes ${shapes.links.join(" | ")}`).toBe(shapes.links.length);
    // The legend's key for each reason is drawn with that reason's stroke.
    for (const [i, reason] of shapes.reasons.entries()) {
      const key = page.locator(`.legend .reclaim-key[data-reason="${reason}"] line`);
      const dash = await key.evaluate((e) => getComputedStyle(e).strokeDasharray);
      expect(shapes.links[i].endsWith(` / ${dash}`), `${reason}: legend ${dash}, chart ${shapes.links[i]}`).toBe(true);
    }
  }
});
