// The page at /: reads the JSON API (the shapes `autotune ... --json` prints) and fills the tables;
// the study view shows a study's plots and, while a job tunes it, the job's progress.
// Stored names are user input: every value goes into the page as text (el() appends text nodes,
// attributes are set one by one), never as HTML.
"use strict";

// The API's field names, in one place: a field renamed in the API is renamed here only.
const F = {
  id: "id", study: "study", model: "model", hardware: "hardware", method: "method", depth: "depth", draft: "draft",
  concurrency: "concurrency", tokensPerS: "tokens_per_s", tpotP50: "tpot_ms_p50", speedup: "speedup",
  confirmed: "confirmed", createdAt: "created_at", modelFingerprint: "model_fingerprint",
  hardwareFingerprint: "hardware_fingerprint", profile: "profile",
  // a study (GET /v1/studies)
  name: "name", studyStatus: "status", engine: "engine", target: "target", trialsComplete: "trials_complete",
  trialsFailed: "trials_failed", best: "best", bestTokensPerS: "best_tokens_per_s",
  // a job (GET /v1/jobs) and its progress
  status: "status", progress: "progress", logTail: "log_tail", profileId: "profile_id", error: "error",
  phase: "phase", trialsDone: "trials_done", trialsTotal: "trials_total", builds: "builds", eta: "eta_s",
  etaAtLeast: "eta_at_least",
  // a study's plots (GET /v1/studies/{name}/plots)
  plots: "plots", caption: "caption", url: "url", intervals: "intervals", note: "note",
  // GET /healthz
  version: "version", readOnly: "read_only", schemaIsHead: "schema_is_head",
};
const FORMATS = ["trtllm", "trtllm-bench", "vllm", "sglang", "json"];
const FINAL = ["succeeded", "failed", "cancelled"];
const ACTIVE = ["queued", "running"];
const LIST_LIMIT = 1000; // the API's largest page; the count line says when there are more
const JOBS_LIMIT = 100; // the newest jobs, each with its log tail, asked every JOBS_POLL_MS
const JOBS_POLL_MS = 2000; // the ETA moves between polls: the API computes it when asked

// An element with attributes and children; strings and numbers become text nodes.
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function number(value, digits = 1) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

function configuration(profile) {
  if (profile[F.method] === "none") return "no speculation";
  return `${profile[F.method]} depth ${profile[F.depth]}` + (profile[F.draft] ? ` (${profile[F.draft]})` : "");
}

function day(iso) {
  return iso ? iso.slice(0, 16).replace("T", " ") : "–";
}

// m:ss, or h:mm:ss from an hour on (as `autotune tune` prints it).
function clock(seconds) {
  const total = Math.max(0, Math.round(seconds));
  const [h, m, s] = [Math.floor(total / 3600), Math.floor(total / 60) % 60, total % 60];
  const pad = (n) => String(n).padStart(2, "0");
  return h ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
}

// A running job's ETA: "≥" while only the first trial's running time is known (it grows then).
function eta(progress) {
  if (progress[F.eta] === null || progress[F.eta] === undefined) return "–";
  return (progress[F.etaAtLeast] ? "≥ " : "") + clock(progress[F.eta]);
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// GET a JSON route: its body and X-Total-Count; an ApiError with the one error shape's message.
async function getJSON(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    throw new ApiError(response.status, (body && body.error && body.error.message) || response.statusText);
  }
  return { data: await response.json(), total: Number(response.headers.get("X-Total-Count")) };
}

function studyPath(name) {
  return `/v1/studies/${encodeURIComponent(name)}`;
}

function fill(table, rows) {
  table.tBodies[0].replaceChildren(...rows);
}

function emptyRow(table, text) {
  return el("tr", {}, el("td", { colspan: table.tHead.rows[0].cells.length, class: "empty" }, text));
}

function countLine(id, shown, total, what) {
  document.getElementById(id).textContent =
    total > shown ? `The newest ${shown} of ${total} ${what}.` : `${shown} ${what}.`;
}

function showError(message) {
  const status = document.getElementById("status");
  status.textContent = message;
  status.hidden = false;
}

function exportLinks(profileId) {
  return FORMATS.map((format) =>
    el("a", { class: "button", download: "", "data-format": format,
              href: `/v1/profiles/${encodeURIComponent(profileId)}/export?format=${encodeURIComponent(format)}` }, format));
}

function profileRow(profile) {
  return el("tr", { id: `profile-${profile[F.id]}`, "data-profile-id": profile[F.id] },
    el("td", {}, profile[F.id]), el("td", {}, profile[F.study]), el("td", {}, profile[F.model]),
    el("td", {}, profile[F.hardware]), el("td", {}, configuration(profile)), el("td", {}, profile[F.concurrency]),
    el("td", { class: "number" }, number(profile[F.tokensPerS])), el("td", { class: "number" }, number(profile[F.tpotP50], 2)),
    el("td", { class: "number" }, number(profile[F.speedup], 2)), el("td", {}, profile[F.confirmed] ? "yes" : "no"),
    el("td", {}, day(profile[F.createdAt])), el("td", { class: "exports" }, ...exportLinks(profile[F.id])));
}

// One /v1/profiles/best question per (model, hardware) pair that has profiles, by fingerprint.
async function bestRows(profiles) {
  const pairs = new Map();
  for (const p of profiles) pairs.set(`${p[F.modelFingerprint]}\u0000${p[F.hardwareFingerprint]}`, p);
  const answers = await Promise.all([...pairs.values()].map((p) => {
    const query = new URLSearchParams({ model: p[F.modelFingerprint], hardware: p[F.hardwareFingerprint] });
    return getJSON(`/v1/profiles/best?${query}`).then((answer) => answer.data[F.profile]);
  }));
  return answers.map((best) => el("tr", { "data-profile-id": best[F.id] },
    el("td", {}, best[F.model]), el("td", {}, best[F.hardware]), el("td", {}, configuration(best)),
    el("td", {}, best[F.concurrency]), el("td", { class: "number" }, number(best[F.tokensPerS])),
    el("td", { class: "number" }, number(best[F.speedup], 2)), el("td", {}, profileLink(best[F.id]))));
}

function profileLink(id) {
  return id === null || id === undefined ? "–" : el("a", { href: `#profile-${id}`, class: "profile-link" }, `profile ${id}`);
}

function studyButton(name, label) {
  const button = el("button", { type: "button", class: "button", "data-study": name }, label);
  button.addEventListener("click", () => showStudy(name));
  return button;
}

function studyRow(study) {
  const trials = `${study[F.trialsComplete]} complete` + (study[F.trialsFailed] ? `, ${study[F.trialsFailed]} failed` : "");
  return el("tr", { "data-study": study[F.name] },
    el("td", {}, study[F.name]), el("td", {}, study[F.studyStatus]), el("td", {}, study[F.engine]),
    el("td", {}, study[F.target]), el("td", {}, study[F.hardware]), el("td", {}, trials), el("td", {}, study[F.best] ?? "–"),
    el("td", { class: "number" }, number(study[F.bestTokensPerS])), el("td", {}, day(study[F.createdAt])),
    el("td", {}, studyButton(study[F.name], "show")));
}

// A job's progress in words: "screening 3/12 trials".
function progressText(progress) {
  const total = progress[F.trialsTotal];
  return `${progress[F.phase] ?? ""} ${total ? `${progress[F.trialsDone] ?? 0}/${total} trials` : ""}`.trim();
}

function progressCell(job) {
  const progress = job[F.progress] || {};
  const bar = progress[F.trialsTotal] ? el("progress", { max: progress[F.trialsTotal], value: progress[F.trialsDone] ?? 0 }) : "";
  return el("td", {}, bar, progressText(progress));
}

function logText(job) {
  const tail = job[F.logTail];
  return Array.isArray(tail) ? tail.join("\n") : tail ?? "";
}

function jobRow(job) {
  const progress = job[F.progress] || {};
  const log = logText(job);
  return el("tr", { "data-job-id": job[F.id], "data-status": job[F.status] },
    el("td", {}, job[F.id]), el("td", {}, job[F.status]),
    el("td", {}, job[F.study] ? studyButton(job[F.study], job[F.study]) : "–"),
    progressCell(job), el("td", {}, progress[F.builds] ?? "–"),
    el("td", {}, job[F.status] === "running" ? eta(progress) : "–"),
    el("td", {}, profileLink(job[F.profileId])),
    el("td", {}, job[F.error] ? el("pre", { class: "error" }, job[F.error]) : "", log ? el("pre", {}, log) : ""));
}

// --- the study view ----------------------------------------------------------------------------

let shown = null; // the study in the view: { name, version, job } (job: the progress last drawn)

async function showStudy(name) {
  shown = { name, version: null, job: null };
  const section = document.getElementById("study-view");
  document.getElementById("study-title").textContent = `Study ${name}`;
  document.getElementById("report-link").setAttribute("href", `${studyPath(name)}/report`);
  document.getElementById("study-job").hidden = true;
  document.getElementById("plots").replaceChildren();
  document.getElementById("plots-note").textContent = "Drawing the plots…";
  section.hidden = false;
  section.scrollIntoView();
  await Promise.all([loadPlots(name), refreshJobs()]);
}

// The study's plots, each with its caption (which says what its error bars are); an image is
// replaced only when its version changed, so a running study's plots do not flicker.
async function loadPlots(name) {
  const listing = (await getJSON(`${studyPath(name)}/plots`)).data;
  if (!shown || shown.name !== name || shown.version === listing.version) return;
  shown.version = listing.version;
  const plots = listing[F.plots];
  document.getElementById("plots-note").textContent = !plots.length
    ? "No complete trial yet: nothing to plot."
    : listing[F.intervals] ? "Error bars are 95 % intervals over repeated, interleaved rounds." : listing[F.note];
  document.getElementById("plots").replaceChildren(...plots.map((plot) =>
    el("figure", { "data-plot": plot[F.name] },
      el("img", { src: plot[F.url], alt: plot[F.caption], loading: "eager" }), el("figcaption", {}, plot[F.caption]))));
}

// The newest job tuning the study in the view, while it is queued or running; its plots are drawn
// again each time it finishes a trial, and once more when it ends.
function followJob(jobs) {
  if (!shown) return;
  const panel = document.getElementById("study-job");
  const job = jobs.find((j) => j[F.study] === shown.name && (ACTIVE.includes(j[F.status]) ||
                                                             (shown.job && shown.job[F.id] === j[F.id])));
  if (!job) {
    panel.hidden = true;
    return;
  }
  const progress = job[F.progress] || {};
  const before = shown.job;
  shown.job = job;
  panel.hidden = !ACTIVE.includes(job[F.status]);
  panel.dataset.status = job[F.status];
  document.getElementById("study-job-line").replaceChildren(
    `Job ${job[F.id]}: `, el("span", { class: "status" }, job[F.status]), " · ", progressText(progress) || "waiting",
    " · ETA ", el("span", { class: "eta" }, eta(progress)));
  document.getElementById("study-job-log").textContent = logText(job);
  const moved = before && (before[F.status] !== job[F.status] ||
                           (before[F.progress] || {})[F.trialsDone] !== progress[F.trialsDone]);
  if (moved) loadPlots(shown.name).catch((error) => showError(`Plots: ${error.message}`));
}

// --- loading and polling -----------------------------------------------------------------------

const statuses = new Map(); // job id -> the status last seen

async function loadResults() {
  const [profiles, studies] = await Promise.all(
    [getJSON(`/v1/profiles?limit=${LIST_LIMIT}`), getJSON(`/v1/studies?limit=${LIST_LIMIT}`)]);
  const profileTable = document.getElementById("profiles");
  fill(profileTable, profiles.data.length ? profiles.data.map(profileRow) : [emptyRow(profileTable, "No profiles stored.")]);
  countLine("profiles-count", profiles.data.length, profiles.total, "profiles");
  const studyTable = document.getElementById("studies");
  fill(studyTable, studies.data.length ? studies.data.map(studyRow) : [emptyRow(studyTable, "No studies stored.")]);
  countLine("studies-count", studies.data.length, studies.total, "studies");
  const bestTable = document.getElementById("best");
  const best = await bestRows(profiles.data);
  fill(bestTable, best.length ? best : [emptyRow(bestTable, "No profiles stored.")]);
}

// The jobs table; the stored results again when a job ended since the last look (its profile and
// study are new). False when the server has no job queue.
async function refreshJobs() {
  const table = document.getElementById("jobs");
  const note = document.getElementById("jobs-note");
  let jobs;
  try {
    jobs = (await getJSON(`/v1/jobs?limit=${JOBS_LIMIT}`)).data;
  } catch (error) {
    if (error.status !== 404) throw error;
    note.textContent = "No job queue on this server.";
    table.hidden = true;
    return false;
  }
  note.textContent = "Queued, running and finished tunes, newest first; refreshed every few seconds.";
  fill(table, jobs.length ? jobs.map(jobRow) : [emptyRow(table, "No jobs.")]);
  const ended = jobs.some((job) => statuses.has(job[F.id]) && statuses.get(job[F.id]) !== job[F.status] &&
                                   FINAL.includes(job[F.status]));
  for (const job of jobs) statuses.set(job[F.id], job[F.status]);
  followJob(jobs);
  if (ended) await loadResults();
  return true;
}

async function load() {
  const health = (await getJSON("/healthz")).data;
  document.getElementById("server").textContent =
    `autotune ${health[F.version]}` + (health[F.readOnly] ? " · read-only" : "") +
    (health[F.schemaIsHead] ? "" : " · the database is not at this autotune's schema");
  await loadResults();
  if (await refreshJobs()) {
    setInterval(() => refreshJobs().catch((error) => showError(`Jobs: ${error.message}`)), JOBS_POLL_MS);
  }
  document.body.dataset.loaded = "true"; // for the browser test: everything above has been drawn
}

load().catch((error) => {
  showError(`Could not read the stored results: ${error.message}`);
  document.body.dataset.loaded = "error";
});
