try {
  await shop.getItem("tne");
  throw { code: 7, reason: "custom" };
} catch (e) {
  console.log(typeof e, e.code, e.reason, e instanceof Error);
}
