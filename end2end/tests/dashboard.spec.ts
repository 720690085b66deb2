// The on-call pages in a real browser, against the demo fleet writing live.
import { test, expect, Page } from "@playwright/test";

async function hydrated(page: Page) {
  // A debug wasm build hydrating a large timeline can take a while on a loaded 2-core machine.
  await expect(page.locator("body")).toHaveAttribute("data-hydrated", "true", { timeout: 30_000 });
}

test.describe("pages render on the server @nojs", () => {
  test("overview shows attention cards and states", async ({ page }) => {
    await page.goto("/?window=1h");
    await expect(page.getByRole("heading", { name: "Needs attention" })).toBeVisible();
    await expect(page.getByTestId("attention-silent")).toBeVisible();
    await expect(page.getByTestId("state-counts")).toBeVisible();
    await page.screenshot({ path: "screenshots/overview.png", fullPage: true });
  });

  test("failures list honours filters from the URL", async ({ page }) => {
    // The demo's opening has a lost lease within seconds; poll the server-rendered page.
    await expect(async () => {
      await page.goto("/failures?cause=lost_lease");
      await expect(page.getByTestId("runs").locator("tbody tr").first()).toBeVisible({ timeout: 1000 });
    }).toPass({ timeout: 30_000 });
    const states = await page.getByTestId("runs").locator("tbody tr").evaluateAll((rows) =>
      rows.map((r) => r.getAttribute("data-state")),
    );
    expect(states.length).toBeGreaterThan(0);
    expect(new Set(states)).toEqual(new Set(["lost_lease"]));
    await expect(page.getByRole("checkbox", { name: /lost lease/ })).toBeChecked();
    await page.screenshot({ path: "screenshots/failures.png", fullPage: true });
  });

  test("a bad filter names the parameter", async ({ page }) => {
    await page.goto("/failures?cause=melted");
    await expect(page.getByTestId("bad-filter")).toContainText("cause");
  });

  test("task page tells the story", async ({ page }) => {
    await expect(async () => {
      await page.goto("/failures?cause=lost_lease");
      await page.getByTestId("runs").locator("tbody tr a[href^='/tasks/']").first().click({ timeout: 1000 });
      await expect(page.getByTestId("story")).toBeVisible({ timeout: 2000 });
    }).toPass({ timeout: 30_000 });
    await expect(page.getByRole("heading", { name: /Task #\d+/ })).toBeVisible();
    await expect(page.getByTestId("task-runs").locator("tbody tr")).not.toHaveCount(0);
    await expect(page.getByTestId("task-runs")).toContainText("rejected (0 rows)");
    await page.screenshot({ path: "screenshots/task.png", fullPage: true });
  });

  test("workers page lists the fleet", async ({ page }) => {
    await expect(async () => {
      await page.goto("/workers");
      await expect(page.getByTestId("workers").locator("tbody tr").first()).toBeVisible({ timeout: 1000 });
    }).toPass({ timeout: 20_000 });
    await expect(page.getByTestId("workers")).toContainText("worker-");
    await page.screenshot({ path: "screenshots/workers.png", fullPage: true });
  });

  test("timeline draws swimlanes", async ({ page }) => {
    await expect(async () => {
      await page.goto("/timeline?minutes=5");
      await expect(page.getByTestId("timeline")).toBeVisible({ timeout: 1000 });
    }).toPass({ timeout: 20_000 });
    await expect(page.locator(".timeline a.bar-link").first()).toBeAttached();
    await page.screenshot({ path: "screenshots/timeline.png", fullPage: true });
  });
});

test("failure filters round-trip through the URL", async ({ page }) => {
  await page.goto("/failures");
  await hydrated(page);
  await page.getByRole("checkbox", { name: /lost lease/ }).check();
  await page.getByRole("checkbox", { name: /timeout/ }).check();
  await page.getByRole("button", { name: "Apply" }).click();
  await expect(page).toHaveURL(/cause=lost_lease/);
  await expect(page).toHaveURL(/cause=timeout/);
  // A link pasted into chat opens the same view.
  const url = page.url();
  const other = await page.context().newPage();
  await other.goto(url);
  await expect(other.getByRole("checkbox", { name: /lost lease/ })).toBeChecked();
  await expect(other.getByRole("checkbox", { name: /timeout/ })).toBeChecked();
  await expect(other.getByRole("checkbox", { name: /crash/ })).not.toBeChecked();
  const states = await other.locator("[data-testid=runs] tbody tr").evaluateAll((rows) =>
    rows.map((r) => r.getAttribute("data-state")),
  );
  for (const s of states) expect(["lost_lease", "failed"]).toContain(s);
  await other.close();
});

test("keyboard: ? opens the shortcut help, g f goes to failures", async ({ page }) => {
  await page.goto("/");
  await hydrated(page);
  await page.keyboard.press("?");
  await expect(page.getByRole("dialog", { name: "Keyboard shortcuts" })).toBeVisible();
  await page.keyboard.press("Escape");
  await expect(page.getByRole("dialog")).toHaveCount(0);
  await page.keyboard.press("g");
  await page.keyboard.press("f");
  await expect(page).toHaveURL(/\/failures$/);
  await expect(page.getByRole("heading", { name: "Failures" })).toBeVisible();
});

test("the timeline updates live without a reload", async ({ page }) => {
  test.setTimeout(90_000);
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  await page.goto("/timeline?minutes=5");
  await hydrated(page);
  // A marker that a reload would wipe.
  await page.evaluate(() => ((window as any).__noReload = true));
  const bars = page.locator(".timeline a.bar-link");
  await expect(bars.first()).toBeAttached({ timeout: 20_000 });
  const before = await bars.evaluateAll((els) => els.map((e) => e.getAttribute("data-task")).join(","));
  await expect
    .poll(async () => bars.evaluateAll((els) => els.map((e) => e.getAttribute("data-task")).join(",")), {
      timeout: 20_000,
    })
    .not.toBe(before);
  expect(await page.evaluate(() => (window as any).__noReload)).toBe(true);
  expect(errors.filter((e) => /panicked|hydration/i.test(e))).toEqual([]);
  // Clicking a bar opens its task.
  await bars.last().click();
  await expect(page).toHaveURL(/\/tasks\/\d+/);
  await expect(page.getByTestId("story")).toBeVisible();
});
