const buf = new ArrayBuffer(8);
const dv = new DataView(buf);
const it = await shop.getItem("dv");
dv.setUint32(0, it.stock * 1000, true);
dv.setInt16(4, -2);
console.log(dv.getUint32(0, true), dv.getInt16(4), new Uint8Array(buf).join(","));
