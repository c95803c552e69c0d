const r = await shop.searchItems({ q: "a b&c", ids: [1, 2], filter: { k: "v w" }, "X-Request-Id": "rid" });
console.log(JSON.stringify(r.params), r.request_id);
