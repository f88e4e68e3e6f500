// The page at /: reads the JSON API (the shapes `autotune ... --json` prints) and fills the tables.
// Stored names are user input: every value goes into the page as text (el() appends text nodes,
// attributes are set one by one), never as HTML.
"use strict";

const FORMATS = ["trtllm", "trtllm-bench", "vllm", "sglang", "json"];
const LIST_LIMIT = 1000; // the API's largest page; the count line says when there are more
const JOBS_POLL_MS = 5000;

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
  if (profile.method === "none") return "no speculation";
  return `${profile.method} depth ${profile.depth}` + (profile.draft ? ` (${profile.draft})` : "");
}

function day(iso) {
  return iso ? iso.slice(0, 16).replace("T", " ") : "–";
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
  return el("tr", { "data-profile-id": profile.id },
    el("td", {}, profile.id), el("td", {}, profile.study), el("td", {}, profile.model),
    el("td", {}, profile.hardware), el("td", {}, configuration(profile)), el("td", {}, profile.batch_size),
    el("td", { class: "number" }, number(profile.tokens_per_s)), el("td", { class: "number" }, number(profile.tpot_ms_p50, 2)),
    el("td", { class: "number" }, number(profile.speedup, 2)), el("td", {}, profile.confirmed ? "yes" : "no"),
    el("td", {}, day(profile.created_at)), el("td", { class: "exports" }, ...exportLinks(profile.id)));
}

// One /v1/profiles/best question per (model, hardware) pair that has profiles, by fingerprint.
async function bestRows(profiles) {
  const pairs = new Map();
  for (const p of profiles) pairs.set(`${p.model_fingerprint}\u0000${p.hardware_fingerprint}`, p);
  const answers = await Promise.all([...pairs.values()].map((p) => {
    const query = new URLSearchParams({ model: p.model_fingerprint, hardware: p.hardware_fingerprint });
    return getJSON(`/v1/profiles/best?${query}`).then((answer) => answer.data.profile);
  }));
  return answers.map((best) => el("tr", { "data-profile-id": best.id },
    el("td", {}, best.model), el("td", {}, best.hardware), el("td", {}, configuration(best)),
    el("td", {}, best.batch_size), el("td", { class: "number" }, number(best.tokens_per_s)),
    el("td", { class: "number" }, number(best.speedup, 2)), el("td", {}, best.id)));
}

function showReport(name) {
  const path = `/v1/studies/${encodeURIComponent(name)}/report`;
  document.getElementById("report-title").textContent = `Report: ${name}`;
  document.getElementById("report-link").setAttribute("href", path);
  document.getElementById("report").setAttribute("src", path);
  const section = document.getElementById("report-section");
  section.hidden = false;
  section.scrollIntoView();
}

function studyRow(study) {
  const button = el("button", { type: "button", class: "button" }, "show");
  button.addEventListener("click", () => showReport(study.name));
  const trials = `${study.trials_complete} complete` + (study.trials_failed ? `, ${study.trials_failed} failed` : "");
  return el("tr", { "data-study": study.name },
    el("td", {}, study.name), el("td", {}, study.status), el("td", {}, study.engine), el("td", {}, study.target),
    el("td", {}, study.hardware), el("td", {}, trials), el("td", {}, study.best ?? "–"),
    el("td", { class: "number" }, number(study.best_tokens_per_s)), el("td", {}, day(study.created_at)),
    el("td", {}, button));
}

function jobRow(job) {
  const progress = job.progress || {};
  const done = progress.trials_done ?? 0;
  const total = progress.trials_total ?? 0;
  const bar = total ? el("progress", { max: total, value: done }) : "";
  const log = Array.isArray(job.log_tail) ? job.log_tail.join("\n") : job.log_tail ?? "";
  return el("tr", { "data-job-id": job.id, "data-state": job.state },
    el("td", {}, job.id), el("td", {}, job.state), el("td", {}, job.study ?? "–"),
    el("td", {}, bar, ` ${progress.phase ?? ""} ${total ? `${done}/${total} trials` : ""}`.trim()),
    el("td", {}, progress.builds ?? "–"), el("td", {}, progress.eta_s == null ? "–" : `${Math.round(progress.eta_s)} s`),
    el("td", {}, job.profile_id ?? "–"),
    el("td", {}, job.error ? el("pre", { class: "error" }, job.error) : "", log ? el("pre", {}, log) : ""));
}

async function loadJobs() {
  const table = document.getElementById("jobs");
  const note = document.getElementById("jobs-note");
  try {
    const jobs = (await getJSON("/v1/jobs")).data;
    note.textContent = "Queued, running and finished tunes, newest first; refreshed every few seconds.";
    fill(table, jobs.length ? jobs.map(jobRow) : [emptyRow(table, "No jobs.")]);
    return true;
  } catch (error) {
    if (error.status !== 404) throw error;
    note.textContent = "No job queue on this server.";
    table.hidden = true;
    return false; // nothing to poll
  }
}

async function load() {
  const health = (await getJSON("/healthz")).data;
  document.getElementById("server").textContent =
    `autotune ${health.version}` + (health.read_only ? " · read-only" : "") +
    (health.schema_is_head ? "" : " · the database is not at this autotune's schema");
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
  if (await loadJobs()) {
    setInterval(() => loadJobs().catch((error) => showError(`Jobs: ${error.message}`)), JOBS_POLL_MS);
  }
  document.body.dataset.loaded = "true"; // for the browser test: everything above has been drawn
}

load().catch((error) => {
  showError(`Could not read the stored results: ${error.message}`);
  document.body.dataset.loaded = "error";
});
