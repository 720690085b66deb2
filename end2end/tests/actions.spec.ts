// Operator actions in a real browser. The first server (baseURL) is local mode: one operator,
// no login. The second (E2E_USERS_URL) serves the same database in users mode, where a viewer
// and an operator sign in with the login form. The demo fleet keeps writing, so a task can
// change between the page and the click: the server then refuses with what changed, and these
// tests retry on a fresh page rather than assume a still world.
import { test, expect, Page, hydrated } from "./support";
import * as fs from "node:fs";

const usersURL = process.env.E2E_USERS_URL ?? "http://127.0.0.1:3101";


async function signIn(page: Page, user: string, password: string) {
  await page.goto(`${usersURL}/login`);
  await page.locator("input[name=username]").fill(user);
  await page.locator("input[name=password]").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("whoami")).toContainText(user);
}

/// Fills and submits the open confirmation; ticks whatever it asks to acknowledge.
async function confirmRequeue(page: Page, reason: string) {
  const form = page.getByTestId("confirm-form");
  await expect(form).toBeVisible();
  await expect(page.getByTestId("requeue-changes")).toContainText("queued");
  await expect(page.getByTestId("requeue-changes")).toContainText("lease epoch");
  if (await page.getByTestId("fence").isVisible()) await page.getByTestId("fence").check();
  if (await page.getByTestId("unsafe-ack").isVisible()) await page.getByTestId("unsafe-ack").check();
  // The last run overflowed the context: the page asks to confirm the cause was fixed.
  if (await page.getByTestId("retry-deterministic").isVisible()) await page.getByTestId("retry-deterministic").check();
  await page.getByTestId("reason").fill(reason);
  await page.getByTestId("confirm").click();
}

test("an operator re-queues from the task page, sees the confirmation and the audit entry", async ({ page }) => {
  let taskPath = "";
  await expect(async () => {
    await page.goto("/failures?cause=timeout,crash,api_error,context_overflow,other");
    await hydrated(page);
    const link = page.getByTestId("row-requeue").first();
    await expect(link).toBeVisible({ timeout: 2000 });
    await link.click();
    await expect(page).toHaveURL(/\/tasks\/\d+\?act=requeue/);
    await hydrated(page);
    taskPath = new URL(page.url()).pathname;
    await confirmRequeue(page, "e2e: upstream API recovered");
    await expect(page.getByTestId("action-result")).toContainText("re-queued by local", { timeout: 5000 });
  }).toPass({ timeout: 60_000 });
  await expect(page.getByTestId("action-result")).toContainText(/epoch \d+ → \d+/);
  await expect(page.getByTestId("task-audit")).toContainText("e2e: upstream API recovered");
  await page.screenshot({ path: "screenshots/requeue-task.png", fullPage: true });

  const taskId = taskPath.split("/").pop();
  await page.goto(`/audit?task=${taskId}`);
  await expect(page.getByTestId("audit").locator("tbody tr").first()).toContainText("re-queued");
  await expect(page.getByTestId("audit")).toContainText("e2e: upstream API recovered");
  await expect(page.getByTestId("audit")).toContainText("local");
});

test("a stale confirmation is refused with what changed", async ({ page }) => {
  // Two tabs on one task: the first re-queues, the second (still showing the old epoch) is refused.
  let taskPath = "";
  await expect(async () => {
    await page.goto("/failures?cause=timeout,crash,api_error,context_overflow,other");
    await hydrated(page);
    await page.getByTestId("row-requeue").first().click({ timeout: 2000 });
    // The task page's code is loaded on the way (a lazy route): the URL changes once it is here.
    await expect(page).toHaveURL(/\/tasks\/\d+\?act=requeue/);
    await hydrated(page);
    taskPath = new URL(page.url()).pathname;
    const other = await page.context().newPage();
    await other.goto(`${taskPath}?act=requeue`);
    await hydrated(other);
    await confirmRequeue(other, "e2e: first tab");
    await expect(other.getByTestId("action-result")).toBeVisible({ timeout: 5000 });
    await other.close();
    await confirmRequeue(page, "e2e: second tab");
    await expect(page.getByTestId("action-refused")).toContainText("changed since you looked", { timeout: 5000 });
  }).toPass({ timeout: 60_000 });
  await expect(page.getByTestId("action-refused")).toContainText(/epoch \d+ → \d+/);
});

test("an operator re-queues a selection from a filtered list", async ({ page }) => {
  await expect(async () => {
    await page.goto("/failures?cause=timeout,crash,api_error,context_overflow,other");
    await hydrated(page);
    // The oldest failure on the page: its task has most likely finished retrying by now.
    await page.getByTestId("select-task").last().check({ timeout: 2000 });
    await page.getByTestId("requeue-selected").click();
    const panel = page.getByTestId("bulk-panel");
    await expect(panel.getByTestId("bulk-count")).toBeVisible({ timeout: 3000 });
    // Held by a live lease right now: the preview offers to fence it.
    if (await page.getByTestId("bulk-fence").isVisible()) await page.getByTestId("bulk-fence").locator("input").check();
    // Its last run overflowed the context: left out unless included.
    if (await page.getByTestId("bulk-include-deterministic").isVisible()) await page.getByTestId("bulk-include-deterministic").check();
    await expect(panel.getByTestId("bulk-count")).toContainText("This will re-queue 1 task.", { timeout: 3000 });
    if (await page.getByTestId("bulk-unsafe-ack").isVisible()) await page.getByTestId("bulk-unsafe-ack").check();
    await page.getByTestId("bulk-reason").fill("e2e: bulk after the outage");
    await page.getByTestId("bulk-confirm").click();
    await expect(page.getByTestId("bulk-result")).toContainText("Re-queued 1 task:", { timeout: 5000 });
  }).toPass({ timeout: 60_000 });
  await page.screenshot({ path: "screenshots/requeue-bulk.png", fullPage: true });
  await page.goto("/audit?action=requeue");
  await expect(page.getByTestId("audit")).toContainText("e2e: bulk after the outage");
});

test("re-queue all matching shows a preview count first", async ({ page }) => {
  await page.goto("/failures?cause=timeout,crash,api_error,context_overflow,other");
  await hydrated(page);
  await page.getByTestId("requeue-matching").click();
  await expect(page.getByTestId("bulk-count")).toContainText(/This will re-queue \d+ tasks?\./);
  await page.getByRole("button", { name: "Cancel" }).click();
  await expect(page.getByTestId("bulk-panel")).toHaveCount(0);
});

test("a viewer sees no action buttons and the API refuses", async ({ page }) => {
  await signIn(page, "vera", "vera-pw");
  await expect(page.getByTestId("whoami")).toContainText("viewer");
  await expect(async () => {
    await page.goto(`${usersURL}/failures`);
    await hydrated(page);
    await expect(page.getByTestId("runs").locator("tbody tr").first()).toBeVisible({ timeout: 2000 });
  }).toPass({ timeout: 30_000 });
  await expect(page.getByTestId("bulk-bar")).toHaveCount(0);
  await expect(page.getByTestId("select-task")).toHaveCount(0);
  await expect(page.getByTestId("row-requeue")).toHaveCount(0);
  const href = await page.getByTestId("runs").locator("tbody tr a[href^='/tasks/']").first().getAttribute("href");
  await page.goto(`${usersURL}${href}?act=requeue`);
  await hydrated(page);
  await expect(page.getByTestId("story")).toBeVisible();
  await expect(page.getByTestId("actions")).toHaveCount(0);
  await expect(page.getByTestId("confirm-form")).toHaveCount(0);

  // The session cookie goes along with page.request: signed in, but not allowed.
  const id = href!.split("/").pop();
  const answer = await page.request.post(`${usersURL}/api/v1/tasks/${id}/requeue`, {
    data: { reason: "viewer tries", expected_epoch: 1 },
  });
  expect(answer.status()).toBe(403);
  expect((await answer.json()).error).toBe("forbidden");
  // Nothing applied, but the attempt is on the record: who, how signed in, refused why.
  const applied = await page.request.get(`${usersURL}/api/v1/audit?actor=vera&outcome=applied`);
  expect((await applied.json()).actions).toEqual([]);
  const tried = (await (await page.request.get(`${usersURL}/api/v1/audit?actor=vera`)).json()).actions;
  expect(tried).toHaveLength(1);
  expect(tried[0]).toMatchObject({ task_id: Number(id), outcome: "refused:forbidden", via: "session", reason: "viewer tries" });
});

test("an operator signed in on the users server sees the actions; logged out, the API says 401", async ({ page }) => {
  await signIn(page, "oscar", "oscar-pw");
  await expect(page.getByTestId("whoami")).toContainText("operator");
  await expect(async () => {
    await page.goto(`${usersURL}/failures`);
    await hydrated(page);
    await expect(page.getByTestId("bulk-bar")).toBeVisible({ timeout: 2000 });
  }).toPass({ timeout: 30_000 });
  await page.getByTestId("logout").click();
  await expect(page).toHaveURL(/\/login/);
  const answer = await page.request.post(`${usersURL}/api/v1/tasks/1/requeue`, {
    data: { reason: "after logout", expected_epoch: 1 },
  });
  expect(answer.status()).toBe(401);
});

test("a task's story downloads as Markdown, and the failures list as CSV", async ({ page }) => {
  await page.goto("/failures");
  await hydrated(page);
  const first = page.getByTestId("runs").locator('tbody tr a[href^="/tasks/"]').first();
  await expect(first).toBeVisible();
  const taskPath = (await first.getAttribute("href"))!;
  const taskId = taskPath.split("/").pop();

  const [csv] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export-csv").click()]);
  expect(csv.suggestedFilename()).toBe("lastword-runs.csv");
  const rows = fs.readFileSync((await csv.path())!, "utf8").trim().split("\n");
  expect(rows[0]).toMatch(/^run_id,task_id,kind,source,safety,worker,lease_epoch,state,cause,/);
  expect(rows.length).toBeGreaterThan(1);
  // As the page lists: failures only (the first record; later lines may continue a quoted text).
  expect(rows[1]).toMatch(/^\d+,\d+,[^,]*,[^,]*,[^,]*,[^,]*,\d+,(silent|lost_lease|failed|empty_output),/);

  await page.goto(taskPath);
  await hydrated(page);
  const [md] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export-md").click()]);
  expect(md.suggestedFilename()).toBe(`task-${taskId}.md`);
  const story = fs.readFileSync((await md.path())!, "utf8");
  expect(story).toContain(`# Task #${taskId} — `);
  expect(story).toMatch(/## Attempts \(\d+\)/);
  expect(story).toContain("| epoch | run | worker | claimed | finished | final write | state | cause | trace |");
  expect(story).toContain("## Audit trail");
});

test("an operator acknowledges an attention item and a viewer elsewhere sees it taken", async ({ page, browser }) => {
  // The search below retries for up to 90 s while the demo fleet moves on; the test may take that long.
  test.setTimeout(150_000);
  const note = `e2e: investigating — refund team paged ${Date.now()}`;
  let taskId = 0;
  await expect(async () => {
    // A task with an item nobody has taken yet (the demo fleet makes dead tasks and double executions).
    const runs = await (await page.request.get("/api/v1/runs?state=failed,lost_lease,silent,empty_output&limit=200")).json();
    taskId = 0;
    for (const r of runs.runs) {
      const t = await (await page.request.get(`/api/v1/tasks/${r.task_id}`)).json();
      if (t.attention.length > 0 && t.acknowledgements.length === 0) {
        taskId = r.task_id;
        break;
      }
    }
    expect(taskId, "a task with an open attention item").toBeGreaterThan(0);
    await page.goto(`/tasks/${taskId}`);
    await hydrated(page);
    await expect(page.getByTestId("unacknowledged").first()).toContainText("nobody has taken it");
    await page.getByTestId("acknowledge-open").click();
    await expect(page.getByTestId("attention-choice")).toBeVisible();
    await page.getByTestId("reason").fill(note);
    await page.getByTestId("confirm").click();
    await expect(page.getByTestId("action-result")).toContainText("acknowledged by local", { timeout: 5000 });
  }).toPass({ timeout: 90_000 });
  await expect(page.getByTestId("acknowledged").first()).toContainText("taken by local");
  await expect(page.getByTestId("acknowledged").first()).toContainText(note);
  await expect(page.getByTestId("task-audit")).toContainText(note);
  await page.screenshot({ path: "screenshots/acknowledged.png", fullPage: true });

  // Someone else, signed in on the users server (same database), sees who has it.
  const other = await browser.newPage();
  await signIn(other, "vera", "vera-pw");
  await other.goto(`${usersURL}/tasks/${taskId}`);
  await hydrated(other);
  await expect(other.getByTestId("acknowledged").first()).toContainText(note);
  await expect(other.getByTestId("acknowledge-open")).toHaveCount(0);
  await other.close();
});
