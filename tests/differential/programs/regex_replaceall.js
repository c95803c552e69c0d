const it = await shop.getItem("ra");
console.log(it.name.replaceAll(" ", "_"), "aaa".replaceAll("a", "b"));
