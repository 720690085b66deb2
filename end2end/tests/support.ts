// Shared by every spec: Playwright's `test` with each page's script errors kept, and the one
// wait for hydration. A page that never hydrates then fails with what the browser said (a wasm
// panic prints its message and place to the console), not only "attribute was null".
import { test as base, expect, Page } from "@playwright/test";

export { expect };
export type { Page };

const scriptErrors = new WeakMap<Page, string[]>();

/** Keeps every page error and console error of the test's page, for [`hydrated`]'s message. */
export const test = base.extend({
  page: async ({ page }, use) => {
    const errors: string[] = [];
    scriptErrors.set(page, errors);
    page.on("pageerror", (e) => errors.push(e.stack ?? e.message));
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    await use(page);
  },
});

/**
 * Waits until the wasm has taken over the server-rendered page (`data-hydrated` on the body).
 * A debug wasm build hydrating a large page can take a while on a loaded 2-core machine.
 */
export async function hydrated(page: Page, timeout = 30_000) {
  try {
    await expect(page.locator("body")).toHaveAttribute("data-hydrated", "true", { timeout });
  } catch (e) {
    const said = scriptErrors.get(page) ?? [];
    throw new Error(
      `${page.url()} did not hydrate within ${timeout} ms; the browser's errors: ${said.length ? said.join("\n") : "none"}\n${e}`,
    );
  }
}
