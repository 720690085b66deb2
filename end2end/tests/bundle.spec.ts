// The browser bundle is split per page (`cargo leptos build --split`; app/src/app.rs): a first
// visit fetches the shell's wasm and the opened page's chunks, all of them in one pack
// (server/src/packs.rs) named by the page's HTML (so the browser starts it with the page, and
// hydration waits on no second round trip), and another page's chunks arrive one by one only
// when the browser goes there.
import { test, expect, hydrated } from "./support";

/** A wasm file under /pkg/ other than the shell's (`lastword.wasm`, `lastword.<hash>.wasm`). */
const isChunk = (path: string) => path.endsWith(".wasm") && !/^\/pkg\/lastword[._]/.test(path);
/** A page's chunks packed into one file. */
const isPack = (path: string) => /^\/pkg\/pack_[a-z_]+\.[^/]+\.pack$/.test(path);

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
  expect(named.filter(isPack), `the overview's pack is preloaded: ${named.join(" ")}`).toEqual([
    expect.stringMatching(/^\/pkg\/pack_overview\./),
  ]);
  expect(new Set(fetched.filter(isPack)).size, "the overview's pack is loaded").toBe(1);
  expect(fetched.filter(isChunk), "every chunk of the overview came in its pack").toEqual([]);
  for (const path of fetched) expect(named, `${path} was fetched but the page did not name it`).toContain(path);
  // The timeline by the navigation bar: no page load, its own chunks fetched (one by one), the
  // page alive, on a shell that came alive with chunks taken from the pack.
  const before = fetched.length;
  await page.locator('nav a[href="/timeline"]').click();
  await expect(page).toHaveURL(/\/timeline/);
  await expect(page.locator(".timeline svg")).toBeVisible({ timeout: 20_000 });
  const arrived = fetched.slice(before).filter(isChunk);
  expect(arrived.filter((p) => !named.includes(p)).length, `the timeline's chunk: ${arrived.join(" ")}`).toBeGreaterThan(0);
  expect(fetched.slice(before).filter((p) => /^\/pkg\/lastword[._]/.test(p)), "the shell is not fetched again").toEqual([]);
});

test("every page's HTML names its own pack, every time", async ({ request }) => {
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
      expect(html, `${path}, render ${i + 1}`).toMatch(new RegExp(`<link(?=[^>]*rel="preload")[^>]*/pkg/pack_${route}\\.[^"]+\\.pack"`));
      expect(html, `${path}, render ${i + 1}: its chunks come in the pack, never also one by one`).not.toMatch(
        /\/pkg\/(chunk_|split_)[^"]*\.wasm/,
      );
      expect(html, `${path}, render ${i + 1}: the chunk loader`).toMatch(/<link(?=[^>]*rel="modulepreload")[^>]*\/pkg\/__wasm_split\./);
    }
  }
});

test("a page whose pack does not arrive fetches its chunks one by one and comes alive", async ({ page }) => {
  const fetched: string[] = [];
  page.on("request", (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith("/pkg/")) fetched.push(path);
  });
  await page.route("**/*.pack", (route) => route.fulfill({ status: 503, body: "unavailable" }));
  await page.goto("/failures");
  await hydrated(page);
  expect(fetched.filter(isPack).length, "the pack was asked for").toBeGreaterThan(0);
  expect(fetched.filter(isChunk).length, "then each chunk on its own").toBeGreaterThan(0);
  // Alive: a client-side navigation to another page works.
  await page.locator('nav a[href="/workers"]').click();
  await expect(page).toHaveURL(/\/workers/);
  await expect(page.locator("h1")).toContainText(/workers/i, { timeout: 20_000 });
});

test("a task's confirmation form is a chunk of its own, fetched on the click, and hydrated when the server sends it open", async ({ page }) => {
  const fetched: string[] = [];
  page.on("request", (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith("/pkg/")) fetched.push(path);
  });
  // A task that can be re-queued now (the demo fleet moves them: a queued one cannot).
  let taskPath = "";
  await expect(async () => {
    const { runs } = await (await page.request.get("/api/v1/runs?state=acted,no_action,skip&limit=5")).json();
    expect(runs.length).toBeGreaterThan(0);
    fetched.length = 0;
    taskPath = `/tasks/${runs[0].task_id}`;
    await page.goto(taskPath);
    await hydrated(page);
    await expect(page.getByTestId("requeue-open")).toBeEnabled({ timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  expect(fetched.filter(isChunk), "a first visit takes the page's chunks from its pack, and not the form's").toEqual([]);
  await page.getByTestId("requeue-open").click();
  await expect(page.getByTestId("confirm-form")).toBeVisible();
  expect(fetched.filter(isChunk).length, "the form's chunk came with the click").toBeGreaterThan(0);

  // A failure row's link opens the page with the form open: the server renders it, and the
  // browser loads the form's chunk before hydrating, so the server's form is the live one.
  const response = await page.goto(`${taskPath}?act=requeue`);
  expect(await response!.text()).toContain('data-testid="confirm-form"');
  await hydrated(page);
  await expect(page.getByTestId("confirm-form")).toHaveCount(1);
  await expect(page.getByTestId("confirm")).toBeDisabled();
  await page.getByTestId("reason").fill("e2e: the hydrated form answers");
  for (const tick of ["fence", "unsafe-ack", "retry-deterministic"]) {
    if (await page.getByTestId(tick).isVisible()) await page.getByTestId(tick).check();
  }
  await expect(page.getByTestId("confirm")).toBeEnabled();
  await page.getByTestId("cancel").click();
  await expect(page.getByTestId("confirm-form")).toHaveCount(0);
});
