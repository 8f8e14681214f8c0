// The ranking page: sign in, show one item at a time, rank its outputs with the mouse or the keyboard, submit.
// Every text from the server is inserted with textContent (never as HTML). The outputs are named only by their
// slot letter; the server alone knows which system each slot holds.
"use strict";

const $ = (id) => document.getElementById(id);
const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const TOKEN_KEY = "sarnmt-human-token";

let token = localStorage.getItem(TOKEN_KEY);
let view = null; // the item shown, as the server sent it
let ranks = []; // the rank of each output slot, null while unranked
let selected = 0; // the slot the keyboard acts on
let total = 0;

async function api(method, path, body) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers["X-Annotator-Token"] = token;
  const response = await fetch(path, {
    method,
    headers,
    cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data;
  try {
    data = await response.json();
  } catch {
    data = { error: `the server answered ${response.status}` };
  }
  if (response.status === 401 && path !== "/api/signin") {
    signOut(data.error);
    throw new Error(data.error);
  }
  if (!response.ok) throw new Error(data.error || `the server answered ${response.status}`);
  return data;
}

function show(section) {
  for (const id of ["signin", "item", "done"]) $(id).hidden = id !== section;
  $("signout").hidden = section === "signin";
}

function message(text, isError = false) {
  $("message").textContent = text;
  $("message").classList.toggle("error", isError);
}

function showSignin(error = "") {
  show("signin");
  $("who").textContent = "";
  $("progress").textContent = "";
  $("signin-error").textContent = error;
  $("signin-who").focus();
}

function signOut(reason = "") {
  token = null;
  view = null;
  localStorage.removeItem(TOKEN_KEY);
  showSignin(reason);
}

async function signIn(who) {
  const data = await api("POST", "/api/signin", { who });
  token = data.token;
  localStorage.setItem(TOKEN_KEY, token);
  render(await api("GET", "/api/next"));
}

function renderProgress(p) {
  total = p.total;
  $("progress").textContent =
    `${p.done} of ${p.total} done · ${p.ranked} ranked · ${p.skipped} skipped · ${p.broken} flagged`;
}

function render(data) {
  $("who").textContent = `${data.annotator} · ${data.task}`;
  renderProgress(data.progress);
  if (data.done) {
    view = null;
    $("done-text").textContent =
      `All ${data.progress.total} items are done. Thank you! You can go back to change a judgement.`;
    show("done");
    return;
  }
  view = data;
  const n = data.outputs.length;
  const before = data.judgement;
  ranks = before && before.ranks ? [...before.ranks] : data.outputs.map(() => null);
  selected = 0;
  $("position").textContent = `Item ${data.position} of ${data.progress.total}`;
  $("source").textContent = data.source;
  $("reference-box").hidden = data.reference === null;
  $("reference").textContent = data.reference ?? "";
  $("comment").value = before ? before.comment : "";
  const said = { ranked: "ranked", skipped: "skipped", broken: "flagged" };
  $("judged-before").textContent = before
    ? `You ${said[before.status]} this item before; submitting again replaces that.`
    : "";
  const list = $("outputs");
  list.replaceChildren();
  data.outputs.forEach((text, slot) => {
    const row = document.createElement("li");
    row.className = "output";
    row.dataset.slot = String(slot);
    const label = document.createElement("span");
    label.className = "label";
    label.textContent = LETTERS[slot];
    const body = document.createElement("p");
    body.className = "text";
    body.textContent = text === "" ? "(empty translation)" : text;
    body.classList.toggle("empty", text === "");
    const buttons = document.createElement("div");
    buttons.className = "ranks";
    buttons.setAttribute("role", "group");
    buttons.setAttribute("aria-label", `rank of translation ${LETTERS[slot]}`);
    for (let rank = 1; rank <= n; rank++) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = String(rank);
      button.dataset.rank = String(rank);
      button.title = rank === 1 ? "rank 1 (best)" : `rank ${rank}`;
      button.addEventListener("click", () => {
        selected = slot;
        setRank(slot, rank);
      });
      buttons.append(button);
    }
    row.append(label, body, buttons);
    row.addEventListener("click", () => select(slot));
    list.append(row);
  });
  message("");
  show("item");
  paint();
}

function paint() {
  for (const row of $("outputs").children) {
    const slot = Number(row.dataset.slot);
    row.classList.toggle("selected", slot === selected);
    row.classList.toggle("ranked", ranks[slot] !== null);
    for (const button of row.querySelectorAll("button")) {
      button.setAttribute("aria-pressed", String(ranks[slot] === Number(button.dataset.rank)));
    }
  }
  $("submit").disabled = ranks.some((r) => r === null);
  $("previous").disabled = !view || view.position <= 1;
}

function select(slot) {
  selected = slot;
  paint();
}

function setRank(slot, rank) {
  ranks[slot] = rank;
  paint();
}

async function submit(status) {
  if (!view) return;
  if (status === "ranked") {
    const missing = ranks.flatMap((r, slot) => (r === null ? [LETTERS[slot]] : []));
    if (missing.length) {
      message(`Give every translation a rank first: ${missing.join(", ")} has none.`, true);
      return;
    }
  }
  const position = view.position;
  const body = {
    item: view.item,
    status,
    ranks: status === "ranked" ? ranks : null,
    comment: $("comment").value,
  };
  try {
    const data = await api("POST", "/api/judgement", body);
    render(data.next);
    message(`Item ${position} saved (${status === "broken" ? "flagged" : status}).`);
  } catch (err) {
    message(`Not saved: ${err.message}`, true);
  }
}

async function go(path) {
  try {
    render(await api("GET", path));
  } catch (err) {
    message(err.message, true);
  }
}

document.addEventListener("keydown", (event) => {
  if (!view || $("item").hidden || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.matches("input, textarea, select")) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  const n = view.outputs.length;
  const key = event.key;
  if (/^[1-9]$/.test(key) && Number(key) <= n) {
    setRank(selected, Number(key));
    select(Math.min(selected + 1, n - 1));
  } else if (key === "ArrowDown" || key === "j") select(Math.min(selected + 1, n - 1));
  else if (key === "ArrowUp" || key === "k") select(Math.max(selected - 1, 0));
  else if (key === "=") {
    ranks = ranks.map(() => 1);
    paint();
  } else if (key === "Enter") submit("ranked");
  else if (key === "s") submit("skipped");
  else if (key === "f") submit("broken");
  else if (key === "p" && view.position > 1) go(`/api/item?position=${view.position - 1}`);
  else if (key === "n") go("/api/next");
  else return;
  event.preventDefault();
});

$("signin-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    await signIn($("signin-who").value.trim());
  } catch (err) {
    $("signin-error").textContent = err.message;
  }
});
$("signout").addEventListener("click", () => signOut());
$("submit").addEventListener("click", () => submit("ranked"));
$("skip").addEventListener("click", () => submit("skipped"));
$("flag").addEventListener("click", () => submit("broken"));
$("all-equal").addEventListener("click", () => {
  ranks = ranks.map(() => 1);
  paint();
});
$("previous").addEventListener("click", () => view && go(`/api/item?position=${view.position - 1}`));
$("review").addEventListener("click", () => go(`/api/item?position=${total}`));

// A link ending in #token=... signs in with that token (and the token leaves the address bar).
const fromLink = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromLink) {
  history.replaceState(null, "", location.pathname);
  signIn(fromLink).catch((err) => showSignin(err.message));
} else if (token) {
  go("/api/next");
} else {
  showSignin();
}
