const rs = await Promise.allSettled([shop.getItem("ok1"), shop.getItem("missing-2"), shop.getItem("boom-1")]);
console.log(rs.map((r) => r.status).join(","));
console.log(rs.filter((r) => r.status === "rejected").map((r) => r.reason.message).join(" | "));
