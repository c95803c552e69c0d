try {
  await shop.call({ method: "GET", route: "/v1/admin/*" }, ["x"]);
} catch (e) {
  console.log(e.message);
}
