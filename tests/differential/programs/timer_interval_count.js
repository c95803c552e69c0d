import * as os from "qjs:os";
let n = 0;
await new Promise((resolve) => {
  const h = os.setInterval(() => { n++; if (n === 3) { os.clearInterval(h); resolve(); } }, 2);
});
console.log(n);
