// The whole path, proven in a real browser: server-rendered HTML, hydration (a click changes
// the page), and a server function that reads the store.
import { test, expect, hydrated } from "./support";

test("overview renders totals on the server @nojs", async ({ page }) => {
  await page.goto("/");
  await expect(page.getByRole("heading", { name: "Overview" })).toBeVisible();
  await expect(page.getByTestId("total-tasks")).toHaveText(/^\d+$/);
  await expect(page.getByTestId("total-runs")).toHaveText(/^\d+$/);
  await page.screenshot({ path: "screenshots/overview.png", fullPage: true });
});

test("the page hydrates: Refresh calls the server function and updates the page", async ({ page }) => {
  await page.goto("/");
  await expect(page.getByTestId("total-tasks")).toBeVisible();
  // Wait for the wasm bundle to attach to the server-rendered DOM.
  await hydrated(page);

  const response = page.waitForResponse((r) => r.url().includes("/api/fn/totals"));
  await page.getByRole("button", { name: "Refresh" }).click();
  const answered = await response;
  expect(answered.status()).toBe(200);
  const body = await answered.json();
  expect(typeof body.tasks).toBe("number");
  expect(typeof body.runs).toBe("number");

  await expect(page.getByTestId("refresh-count")).toHaveText("refreshed once");
  // The demo fleet keeps writing, so the page shows at least what the server function answered.
  await expect
    .poll(async () => Number(await page.getByTestId("total-tasks").textContent()))
    .toBeGreaterThanOrEqual(body.tasks);
});

test("the theme toggle cycles and survives a reload", async ({ page }) => {
  await page.goto("/");
  await hydrated(page);
  const toggle = page.getByTestId("theme-toggle");
  await expect(toggle).toHaveText("Theme: system");
  await toggle.click();
  await expect(toggle).toHaveText("Theme: dark");
  await expect(page.locator(".app")).toHaveAttribute("data-theme", "dark");
  await page.reload();
  await hydrated(page);
  await expect(page.locator(".app")).toHaveAttribute("data-theme", "dark");
});

test("health endpoints answer", async ({ request }) => {
  const healthz = await request.get("/healthz");
  expect(healthz.status()).toBe(200);
  const readyz = await request.get("/readyz");
  expect(readyz.status()).toBe(200);
  expect((await readyz.json()).status).toBe("ready");
});

// The server renders the page as of its clock and the browser hydrates it as of its own. A view
// that read the wall clock while rendering (a lease live on the server and lapsed in the browser,
// a bar's end at "now") would build a different DOM in the browser, and hydration panics. Views
// draw as of the time the data was read, which travels with it: so a browser whose clock is an
// hour off, either way, still hydrates every page.
test("pages hydrate when the browser's clock is an hour off the server's", async ({ page }) => {
  test.setTimeout(120_000);
  for (const offsetMs of [3_600_000, -3_600_000]) {
    await page.clock.setFixedTime(Date.now() + offsetMs);
    for (const path of ["/", "/failures", "/timeline", "/workers", "/leases", "/audit"]) {
      await page.goto(path);
      await hydrated(page);
    }
    // A task held by a live lease, its re-queue confirmation open: the server offers to fence
    // the holder. Demo leases are seconds long, so look until a page is served while it holds.
    let fenced = "";
    await expect(async () => {
      const answer = await page.request.get("/api/v1/runs?state=running&limit=5");
      const { runs } = await answer.json();
      expect(runs.length).toBeGreaterThan(0);
      for (const run of runs) {
        const response = await page.goto(`/tasks/${run.task_id}?act=requeue`);
        if ((await response!.text()).includes('data-testid="fence"')) {
          fenced = page.url();
          return;
        }
      }
      throw new Error("no task was still leased when its page was served");
    }).toPass({ timeout: 60_000 });
    await hydrated(page);
    await expect(page.getByTestId("fence"), `${fenced}, browser clock ${offsetMs / 60_000} min off`).toBeVisible();
  }
});
