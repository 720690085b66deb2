// The browser bundle is split per page (`cargo leptos build --split`; app/src/app.rs): a first
// visit fetches the shell's wasm and the opened page's chunk, every one of them named by the
// page's HTML (so the browser starts them with the page, and hydration waits on no second
// round trip), and another page's chunk arrives only when the browser goes there.
import { test, expect, hydrated } from "./support";

/** A wasm file under /pkg/ other than the shell's (`lastword.wasm`, `lastword.<hash>.wasm`). */
const isChunk = (path: string) => path.endsWith(".wasm") && !/^\/pkg\/lastword[._]/.test(path);

test("a first visit fetches only the files its page names; another page's chunk comes with the visit to it", async ({ page }) => {
  const fetched: string[] = [];
  page.on("request", (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith("/pkg/")) fetched.push(path);
  });
  const response = await page.goto("/");
  const html = await response!.text();
  await hydrated(page);
  const named = [...new Set([...html.matchAll(/\/pkg\/[^"'\s>?]+/g)].map((m) => m[0]))];
  expect(named.filter(isChunk).length, `the overview's chunk is preloaded: ${named.join(" ")}`).toBeGreaterThan(0);
  expect(fetched.filter(isChunk).length, "the overview's chunk is loaded").toBeGreaterThan(0);
  for (const path of fetched) expect(named, `${path} was fetched but the page did not name it`).toContain(path);

  // The timeline by the navigation bar: no page load, its own chunk fetched, the page alive.
  const before = fetched.length;
  await page.locator('nav a[href="/timeline"]').click();
  await expect(page).toHaveURL(/\/timeline/);
  await expect(page.locator(".timeline svg")).toBeVisible({ timeout: 20_000 });
  const arrived = fetched.slice(before).filter(isChunk);
  expect(arrived.filter((p) => !named.includes(p)).length, `the timeline's chunk: ${arrived.join(" ")}`).toBeGreaterThan(0);
  expect(fetched.slice(before).filter((p) => /^\/pkg\/lastword[._]/.test(p)), "the shell is not fetched again").toEqual([]);
});

test("every page's HTML names its own chunk, every time", async ({ request }) => {
  // Three renders each: leptos' own preloads were lost in some renders (a race in its server
  // integration), which this would catch.
  const pages: [string, string][] = [
    ["/", "overview"],
    ["/failures", "failures"],
    ["/timeline?minutes=5", "timeline"],
    ["/workers", "workers"],
    ["/leases", "leases"],
    ["/audit", "audit"],
  ];
  for (const [path, route] of pages) {
    for (let i = 0; i < 3; i++) {
      const html = await (await request.get(path)).text();
      expect(html, `${path}, render ${i + 1}`).toMatch(new RegExp(`<link(?=[^>]*rel="preload")[^>]*/pkg/split___${route}_view_`));
      expect(html, `${path}, render ${i + 1}: the chunk loader`).toMatch(/<link(?=[^>]*rel="modulepreload")[^>]*\/pkg\/__wasm_split\./);
    }
  }
});
