const grid = {};
for (const a of ["p", "q"]) {
  grid[a] = {};
  for (const b of [1, 2]) {
    const it = await shop.getItem(a + b);
    grid[a][b] = it.stock;
  }
}
console.log(JSON.stringify(grid));
