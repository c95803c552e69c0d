class ApiError extends Error {
  constructor(status, body) { super(`API ${status}`); this.name = "ApiError"; this.status = status; this.body = body; }
}
async function get(id) {
  try { return await shop.getItem(id); }
  catch (e) {
    const [, status, body] = e.message.match(/^host api (\d+): (.*)$/s);
    throw new ApiError(Number(status), JSON.parse(body));
  }
}
try { await get("missing-ce"); } catch (e) { console.log(e.name, e.status, e.body.error, e instanceof ApiError, e instanceof Error); }
