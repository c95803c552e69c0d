// No user_id here: the grant pins it, and the broker adds user_id=alice to every list.
function page(n) {
  return mem0.memories_list({page: n, page_size: 2}).then(function (r) {
    console.log("page " + n + " of " + r.count + " memories: " +
      r.results.map(function (m) { return m.memory; }).join(" | "));
    return r.next ? page(n + 1) : "last page";
  });
}
page(1).then(function (end) { console.log(end); },
             function (e) { console.log("failed: " + e.message); });
