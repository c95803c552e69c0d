// A 404 rejects in the body form and resolves in the $response form.
try {
  await shop.getItem("missing-7");
} catch (e) {
  console.log("rejected:", e.message);
}
const r = await shop.$response.getItem("missing-7");
console.log(r.status, JSON.stringify(r.body), r.headers["content-type"]);
const s = await shop.$response.getItem("boom-1");
console.log(s.status, JSON.stringify(s.body));
