const s1 = "caf\u00e9", s2 = "cafe\u0301";
await shop.getStats();
console.log(s1 === s2, s1.normalize() === s2.normalize(), s2.normalize("NFC").length);
