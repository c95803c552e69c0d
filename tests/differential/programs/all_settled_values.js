const rs = await Promise.allSettled(["v1", "v2"].map((id) => shop.getItem(id)));
console.log(JSON.stringify(rs.map((r) => r.value.id)));
