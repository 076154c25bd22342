"""The Track B reference with the token embedding multiplied by zero: real layers, no information from the IDs."""
BASE = "lm"
EXPECT = "independent"
REPLACE = [("        x = self.drop(self.embed(ids))  # (B, T, D)\n",
            "        x = self.drop(self.embed(ids) * 0)  # (B, T, D)\n")]
