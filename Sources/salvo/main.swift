print("salvo")
