const result = await (async () => {
  const it = await shop.getItem("iife");
  return it.name.length;
})();
console.log(result);
