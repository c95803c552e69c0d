const it = await shop.getItem("hex");
const bytes = Uint8Array.from(it.id, (c) => c.charCodeAt(0));
console.log(Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(""));
