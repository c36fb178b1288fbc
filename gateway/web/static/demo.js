// facecrop demo: detect faces in a photo, draw them, and crop it. No build step, no CDN.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { file: null, bitmap: null, faces: [], crop: null, hover: -1, cropTimer: null };
const LABEL_PX = 12; // label text height on screen, in CSS pixels
const HINT = "Confidence is shown where it fits: point at a face (or tap it) for its own. The dashed frame is the crop.";

function authHeaders() {
  const key = $("api-key").value.trim();
  return key ? { Authorization: "Bearer " + key } : {};
}

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

async function callApi(path, params) {
  const body = new FormData();
  body.append("image", state.file);
  const response = await fetch(path + "?" + new URLSearchParams(params), { method: "POST", body, headers: authHeaders() });
  if (!response.ok) {
    const problem = await response.json().catch(() => ({ error: { code: "error", message: response.statusText } }));
    throw new Error(problem.error.code + ": " + problem.error.message);
  }
  return response;
}

// --- drawing: the canvas holds the photo at full resolution; `px` is image pixels per CSS pixel ---

function overlaps(a, b) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

function drawCrop(context, crop, px) {
  context.fillStyle = "rgba(0, 0, 0, 0.45)";
  context.beginPath();
  context.rect(0, 0, context.canvas.width, context.canvas.height);
  context.rect(crop.x, crop.y, crop.width, crop.height);
  context.fill("evenodd");
  context.setLineDash([6 * px, 4 * px]);
  context.lineWidth = 2 * px;
  context.strokeStyle = "#ffffff";
  context.strokeRect(crop.x, crop.y, crop.width, crop.height);
  context.setLineDash([]);
}

function drawFace(context, face, px, highlighted) {
  const r = face.face_rectangle;
  context.lineWidth = (highlighted ? 3 : 2) * px;
  context.strokeStyle = highlighted ? "#ffd600" : "#00e676";
  context.strokeRect(r.x, r.y, r.width, r.height);
  context.fillStyle = "#ff1744";
  const radius = Math.min(2 * px, r.width / 12);
  for (const [x, y] of Object.values(face.landmarks || {})) {
    context.beginPath();
    context.arc(x, y, radius, 0, 2 * Math.PI);
    context.fill();
  }
}

// Where a face's confidence label goes: just above its box, or inside it at the photo's top edge.
function labelOf(context, face, px) {
  const text = face.confidence.toFixed(1) + "%";
  const pad = 2 * px;
  const width = context.measureText(text).width + 2 * pad;
  const height = LABEL_PX * px + 2 * pad;
  const r = face.face_rectangle;
  const x = Math.max(0, Math.min(r.x, context.canvas.width - width));
  return { text, pad, width, height, x, y: r.y >= height ? r.y - height : r.y };
}

// The labels that cover neither another label nor another face, surest faces first.
function fittingLabels(context, px) {
  const boxes = state.faces.map((face) => face.face_rectangle);
  const placed = new Map();
  state.faces.forEach((face, index) => {
    const label = labelOf(context, face, px);
    const clear = boxes.every((box, other) => other === index || !overlaps(label, box));
    if (clear && [...placed.values()].every((other) => !overlaps(label, other))) placed.set(index, label);
  });
  return placed;
}

function drawLabel(context, label, highlighted) {
  context.fillStyle = highlighted ? "#ffd600" : "rgba(0, 0, 0, 0.65)";
  context.fillRect(label.x, label.y, label.width, label.height);
  context.fillStyle = highlighted ? "#000000" : "#ffffff";
  context.fillText(label.text, label.x + label.pad, label.y + label.pad);
}

function draw() {
  const canvas = $("canvas");
  const context = canvas.getContext("2d");
  const px = canvas.width / (canvas.clientWidth || canvas.width);
  context.drawImage(state.bitmap, 0, 0);
  if (state.crop) drawCrop(context, state.crop, px);
  canvas.dataset.crop = state.crop ? Object.values(state.crop).join(",") : "";
  state.faces.forEach((face, index) => drawFace(context, face, px, index === state.hover));
  context.font = `${LABEL_PX * px}px system-ui, sans-serif`;
  context.textBaseline = "top";
  const labels = fittingLabels(context, px);
  for (const label of labels.values()) drawLabel(context, label, false);
  if (state.hover >= 0) drawLabel(context, labelOf(context, state.faces[state.hover], px), true);
  canvas.dataset.labels = String(labels.size);
}

function showFaces(bitmap, faces) {
  const canvas = $("canvas");
  state.bitmap = bitmap;
  state.faces = faces;
  state.hover = -1;
  canvas.width = state.bitmap.width;
  canvas.height = state.bitmap.height;
  draw();
  $("face-info").textContent = HINT;
  $("face-count").textContent = `(${faces.length})`;
  $("face-count").dataset.count = String(faces.length);
}

// --- pointing at a face ---

function faceAt(event) {
  const canvas = $("canvas");
  const x = (event.offsetX * canvas.width) / canvas.clientWidth;
  const y = (event.offsetY * canvas.height) / canvas.clientHeight;
  let found = -1;
  state.faces.forEach((face, index) => {
    const r = face.face_rectangle;
    const inside = x >= r.x && x <= r.x + r.width && y >= r.y && y <= r.y + r.height;
    const smaller = found < 0 || r.width * r.height < state.faces[found].face_rectangle.width * state.faces[found].face_rectangle.height;
    if (inside && smaller) found = index; // the innermost of nested boxes
  });
  return found;
}

function point(index) {
  if (index === state.hover || !state.bitmap) return;
  state.hover = index;
  draw();
  const face = state.faces[index];
  const r = face && face.face_rectangle;
  $("face-info").textContent = face
    ? `Face ${index + 1} of ${state.faces.length}: ${face.confidence.toFixed(2)}% confidence, ${r.width}x${r.height} px at (${r.x}, ${r.y}).`
    : HINT;
}

// --- the crop ---

function detail() {
  return $("detail").value;
}

function cropParams() {
  return { width: $("width").value, height: $("height").value, zoom: $("zoom").value, faces: $("faces").value, detail: detail() };
}

function showCurl(params) {
  const url = new URL("/v1/crop?" + new URLSearchParams(params), window.location.href);
  const key = $("api-key").value.trim() ? " -H 'Authorization: Bearer YOUR_KEY'" : "";
  const name = state.file.name || "photo.jpg";
  const options = Object.entries({ ...params, fit: "cover", gravity: "face" }).map(([k, v]) => `${k}=${v}`).join(",");
  const byUrl = new URL(`/cdn-cgi/image/${options}/${encodeURI(name)}`, window.location.href);
  $("curl").textContent =
    `curl -F image=@${name}${key} '${url}' -o crop.jpg\n\n` +
    `# or by URL, the photo in the origin (originals/ under make serve), for <img src>:\n${byUrl}`;
}

async function crop() {
  if (!state.file) return;
  const params = cropParams();
  showCurl(params);
  try {
    const response = await callApi("/v1/crop", params);
    showPicture("crop-result", await response.blob());
    const rect = response.headers.get("X-Crop-Rect") || "";
    const [x, y, width, height] = rect.split(",").map(Number);
    state.crop = rect ? { x, y, width, height } : null;
    draw();
    $("crop-result").dataset.rect = rect;
  } catch (error) {
    setStatus(error.message, true);
  }
}

async function anonymize() {
  if (!state.file) return;
  try {
    const response = await callApi("/v1/anonymize", { method: $("method").value, shape: $("shape").value });
    showPicture("anonymize-result", await response.blob());
    $("hidden-count").textContent = `(${response.headers.get("X-Face-Count")} hidden)`;
    $("hidden-count").dataset.count = response.headers.get("X-Face-Count");
  } catch (error) {
    setStatus(error.message, true);
  }
}

function showPicture(id, blob) {
  const previous = $(id).src;
  $(id).src = URL.createObjectURL(blob);
  if (previous.startsWith("blob:")) URL.revokeObjectURL(previous);
}

function scheduleCrop() {
  $("zoom-value").textContent = $("zoom").value;
  clearTimeout(state.cropTimer);
  state.cropTimer = setTimeout(crop, 250);
}

// The photo as this browser draws it; for a format it cannot show (HEIC, say), the gateway's own
// rendition: the whole photo, upright, sRGB, as JPEG.
async function bitmapOf(file) {
  try {
    return await createImageBitmap(file, { imageOrientation: "from-image" });
  } catch {
    const response = await callApi("/v1/crop", { zoom: 0, format: "jpeg" });
    return await createImageBitmap(await response.blob());
  }
}

async function load(file) {
  state.file = file;
  state.crop = null;
  setStatus(`Detecting faces in ${file.name}...`);
  $("face-count").dataset.count = "";
  try {
    const bitmap = await bitmapOf(file);
    const response = await callApi("/v1/detect", { min_confidence: 50, max_faces: 1000, detail: detail() });
    const result = await response.json();
    showFaces(bitmap, result.faces);
    setStatus(`${result.faces.length} face(s) in a ${result.image.width}x${result.image.height} photo.`);
    await crop();
    await anonymize();
  } catch (error) {
    setStatus(error.message, true);
  }
}

$("file").addEventListener("change", (event) => event.target.files[0] && load(event.target.files[0]));
const zone = $("drop-zone");
zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
zone.addEventListener("dragleave", () => zone.classList.remove("over"));
zone.addEventListener("drop", (event) => {
  event.preventDefault();
  zone.classList.remove("over");
  if (event.dataTransfer.files[0]) load(event.dataTransfer.files[0]);
});
for (const id of ["width", "height", "zoom", "faces"]) $(id).addEventListener("input", scheduleCrop);
$("detail").addEventListener("change", () => state.file && load(state.file));
for (const id of ["method", "shape"]) $(id).addEventListener("input", anonymize);
const canvas = $("canvas");
canvas.addEventListener("pointermove", (event) => point(faceAt(event)));
canvas.addEventListener("pointerdown", (event) => point(faceAt(event)));
canvas.addEventListener("pointerleave", () => point(-1));
new ResizeObserver(() => state.bitmap && draw()).observe(canvas); // labels stay 12 CSS pixels high
