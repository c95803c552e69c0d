const ps = ["o1", "o2", "o3"].map((id) => __coderunner_host_start(JSON.stringify({ method: "GET", path: "/v1/items/" + id })));
const rs = await Promise.all(ps);
console.log(rs.map((r) => r.status + ":" + JSON.parse(r.body).id).join(" "));
