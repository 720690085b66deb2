// The live timeline on a constructed history (end2end/fixtures/timeline-scale.sql, served by
// the third server of playwright.config.ts): 5 000 runs by 200 workers in the last 15 minutes,
// and task 900001 re-claimed twice across three workers. Prints the render figures that
// BENCHMARKS.md quotes.
import { test, expect, Page } from "@playwright/test";

const scaleURL = process.env.E2E_SCALE_URL ?? "http://127.0.0.1:3102";

async function hydrated(page: Page) {
  await expect(page.locator("body")).toHaveAttribute("data-hydrated", "true", { timeout: 30_000 });
}

test("a task re-claimed twice across three workers is drawn as two links with their reasons", async ({ page }) => {
  await page.goto(`${scaleURL}/timeline?minutes=15&lanes=400&order=name`);
  await hydrated(page);
  const links = page.locator('.timeline path.reclaim[data-task="900001"]');
  await expect(links).toHaveCount(2);
  const ends = await links.evaluateAll((els) =>
    els.map((e) => [e.getAttribute("data-from-run"), e.getAttribute("data-to-run"), e.getAttribute("class")]),
  );
  expect(ends).toEqual([
    ["900001", "900002", "reclaim reason-silent"],
    ["900002", "900003", "reclaim reason-lost_lease"],
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
  expect(inside(s0, a) && inside(e0, b), "silent: worker-a → worker-b").toBe(true);
  expect(inside(s1, b) && inside(e1, c), "lost lease: worker-b → worker-c").toBe(true);

  // Focusing the lost-lease attempt lights its task up in all three lanes and says what it was.
  await page.locator('.timeline a.bar-link[data-run="900002"]').focus();
  await expect(page.getByTestId("timeline-detail")).toContainText("task #900001");
  await expect(page.getByTestId("timeline-detail")).toContainText("lost lease");
  const lit = await page
    .locator(".timeline a.bar-link")
    .evaluateAll((els) => els.filter((e) => getComputedStyle(e).opacity === "1").map((e) => e.getAttribute("data-run")));
  expect(lit.sort()).toEqual(["900001", "900002", "900003"]);
});

test("200 workers and 5 000 runs: lanes limited, glyphs apart, render time measured", async ({ page }) => {
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

  // Every lane, then frame times while the clock moves the picture (one translate a second).
  const all = Date.now();
  await page.getByRole("link", { name: "Show all lanes" }).click();
  await expect(lanes).toHaveCount(203);
  await hydrated(page);
  const allLanes = Date.now() - all;
  const frames: number[] = await page.evaluate(
    () =>
      new Promise((resolve) => {
        const out: number[] = [];
        let last = performance.now();
        const end = last + 3000;
        const tick = (t: number) => {
          out.push(t - last);
          last = t;
          if (t < end) requestAnimationFrame(tick);
          else resolve(out);
        };
        requestAnimationFrame(tick);
      }),
  );
  const sorted = [...frames].sort((x, y) => x - y);
  const p95 = sorted[Math.floor(sorted.length * 0.95)];
  const worst = sorted[sorted.length - 1];
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

  console.log(
    `timeline-scale: 15 min, 5003 runs, 203 workers: first view (40 lanes) hydrated in ${firstHydrated} ms ` +
      `(${drawn.bars} bars, ${drawn.cells} density cells, ${drawn.failedCells} with failures); all lanes in ${allLanes} ms; ` +
      `frames over 3 s with the clock moving: ${frames.length}, p95 ${p95.toFixed(1)} ms, worst ${worst.toFixed(1)} ms; ` +
      `${boxes.length} glyphs, none overlapping`,
  );
});
