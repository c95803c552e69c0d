const r = await shop.searchItems({ q: "h", "X-Request-Id": "req-42" });
console.log(r.request_id, r.q);
