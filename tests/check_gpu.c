/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
int main(void) { return 77; }
