// The Leases page (issue 13) against the demo fleet, which runs with `--lease 3s` (see
// playwright.config.ts): a lease deliberately shorter than some of its runs, so runs outlive it,
// lose it to another worker, and the page suggests a longer one with the numbers behind it.
import { test, expect, hydrated } from "./support";

const SUGGESTION =
  /^Runs of `[^`]+`( last [0-9.]+ (ms|s|min|h) at p95 and)? hold a 3 s lease: (\d+|under 1) % of finished runs outlive it\. A \d+ s lease( \(or a heartbeat every \d+ (ms|s)\))? would have avoided \d+ of the \d+ lost leases in the last 1 h\.$/;

test.describe("lease health", () => {
  test("a lease shorter than the runs gets a suggestion with its numbers @nojs", async ({ page }) => {
    // The figures are shared for up to 30 s: ask again until the demo's lost leases are in them.
    test.setTimeout(150_000);
    await expect(async () => {
      await page.goto("/leases?window=1h");
      await expect(page.getByTestId("lease-suggestion").first()).toBeVisible({ timeout: 1_000 });
    }).toPass({ timeout: 120_000, intervals: [3_000] });
    const suggestion = page.getByTestId("lease-suggestion").first();
    await expect(suggestion).toHaveText(SUGGESTION);
    // The kind it names has its row, with lost leases among the runs that outlived the lease.
    const kind = await suggestion.getAttribute("data-kind");
    expect(kind).toBeTruthy();
    const row = page.getByTestId("lease-kinds").locator(`tr[data-kind="${kind}"]`);
    await expect(row).toBeVisible();
    const lostLeases = Number(await row.locator("td").nth(8).innerText());
    expect(lostLeases).toBeGreaterThan(0);
    await expect(row.locator("td").nth(2)).toHaveText("3 s");
    await expect(page.getByTestId("lease-freshness")).toContainText("figures read at");
    await page.screenshot({ path: "screenshots/leases.png", fullPage: true });
  });

  test("the window and kind live in the URL; the overview has the day's suggestions", async ({ page }) => {
    test.setTimeout(150_000);
    await page.goto("/leases?window=1h");
    await hydrated(page);
    await page.getByRole("navigation", { name: "Window" }).getByRole("link", { name: "6h" }).click();
    await expect(page).toHaveURL(/\/leases\?window=6h$/);
    await expect(page.getByTestId("lease-freshness")).toContainText("last 6h");
    // Follow a kind to the failures list it links to.
    const firstKind = page.getByTestId("lease-kinds").locator("tbody tr").first();
    const kind = await firstKind.getAttribute("data-kind");
    await firstKind.locator("td").first().getByRole("link").click();
    await expect(page).toHaveURL(new RegExp(`/failures\\?kind=${encodeURIComponent(kind ?? "")}$`));

    await expect(async () => {
      await page.goto("/");
      await expect(page.getByTestId("lease-panel").getByTestId("lease-suggestion").first()).toBeVisible({
        timeout: 1_000,
      });
    }).toPass({ timeout: 120_000, intervals: [3_000] });
    await expect(page.getByTestId("lease-panel").getByTestId("lease-suggestion").first()).toContainText(
      "lost leases in the last 24 h",
    );
  });
});
