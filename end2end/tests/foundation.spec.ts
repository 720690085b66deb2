// The whole path, proven in a real browser: server-rendered HTML, hydration (a click changes
// the page), and a server function that reads the store.
import { test, expect } from "@playwright/test";

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
  await expect(page.locator("body")).toHaveAttribute("data-hydrated", "true");

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
  await expect(page.locator("body")).toHaveAttribute("data-hydrated", "true");
  const toggle = page.getByTestId("theme-toggle");
  await expect(toggle).toHaveText("Theme: system");
  await toggle.click();
  await expect(toggle).toHaveText("Theme: dark");
  await expect(page.locator(".app")).toHaveAttribute("data-theme", "dark");
  await page.reload();
  await expect(page.locator("body")).toHaveAttribute("data-hydrated", "true");
  await expect(page.locator(".app")).toHaveAttribute("data-theme", "dark");
});

test("health endpoints answer", async ({ request }) => {
  const healthz = await request.get("/healthz");
  expect(healthz.status()).toBe(200);
  const readyz = await request.get("/readyz");
  expect(readyz.status()).toBe(200);
  expect((await readyz.json()).status).toBe("ready");
});
